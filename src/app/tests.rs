//! `App::update` driven like a user would: replayed fixtures, keys, ticks,
//! mouse; checks what the view would show.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};

use super::fixtures::{self, MS, S, START};
use super::*;
use crate::abi::KIND_RUNQ;
use crate::event::testing::{
    hardirq_record, migrated_runq_record, runq_record, sample_record, task,
};

fn press(app: &mut App, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

fn replay(recording: crate::record::Recording, width: u16, height: u16) -> App {
    let mut app = App::replay(recording, Duration::from_secs(1));
    app.update(Msg::Resize { width, height });
    app
}

fn busy_at_end() -> App {
    let mut app = replay(fixtures::busy(), 200, 50);
    press(&mut app, KeyCode::Char('G'));
    app
}

/// The feed as "cpu:duration:culprit comm", in screen order.
fn feed(app: &App) -> Vec<String> {
    app.rows
        .feed
        .iter()
        .map(|&i| {
            let s = &app.shown.report.stalls[i];
            let culprit = s.culprit.as_ref().map_or("-", |c| c.comm.as_str());
            format!("{}:{}:{culprit}", s.cpu, s.duration_ns / MS)
        })
        .collect()
}

fn culprit_comms(app: &App) -> Vec<&str> {
    app.rows
        .culprits
        .iter()
        .map(|c| c.row.comm.as_str())
        .collect()
}

fn footer_text(app: &App) -> String {
    app.view().footer.iter().map(|s| s.text.as_str()).collect()
}

#[test]
fn the_end_of_a_replay_shows_every_case() {
    let app = busy_at_end();
    assert_eq!(
        feed(&app),
        [
            "3:105:cadvisor",
            "1:45:hog",
            "3:105:cadvisor",
            "2:38:ss",
            "0:62:-",
            "3:105:cadvisor",
            "1:131:hog"
        ],
        "newest first"
    );
    // Three reads of memory.stat in three cgroups are one culprit (case 1).
    let cadvisor = &app.rows.culprits[0].row;
    assert_eq!(cadvisor.comm, "cadvisor");
    assert_eq!(cadvisor.count, 3);
    assert_eq!(
        cadvisor.path.as_deref(),
        Some("/sys/fs/cgroup/memory/kubepods/*/memory.stat")
    );
    assert_eq!(culprit_comms(&app), ["cadvisor", "hog", "ss"]);
    let containers: Vec<&str> = app
        .rows
        .containers
        .iter()
        .map(|c| c.container.as_str())
        .collect();
    assert_eq!(
        containers[0], "pod:0f1e2d3c/4c5f7e9a1b2c",
        "worst p99 first"
    );
    assert_eq!(app.shown.rates.events_per_s, Some(50_000.0));
    assert_eq!(app.rows.cpus, [0, 1, 2, 3]);
}

#[test]
fn replay_plays_in_recording_time_and_stops_at_the_end() {
    let mut app = replay(fixtures::busy(), 120, 40);
    app.update(Msg::Tick { now_ns: 7 });
    app.update(Msg::Tick {
        now_ns: 7 + 3_500 * MS,
    });
    let Mode::Replay(r) = &app.mode else {
        panic!("a replay")
    };
    assert_eq!(r.cursor_ns, START + 3_500 * MS);
    assert_eq!(feed(&app), ["0:62:-", "3:105:cadvisor", "1:131:hog"]);
    app.update(Msg::Tick { now_ns: 7 + 60 * S });
    let Mode::Replay(r) = &app.mode else {
        panic!("a replay")
    };
    assert!(r.at_end() && !r.playing);
    assert_eq!(feed(&app).len(), 7);
    assert!(footer_text(&app).contains("end of the recording"));
}

#[test]
fn n_and_shift_n_step_through_stalls() {
    let mut app = replay(fixtures::busy(), 120, 40);
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(feed(&app), ["1:131:hog"]);
    assert_eq!(app.focus, Pane::Feed);
    press(&mut app, KeyCode::Char('n'));
    assert_eq!(feed(&app), ["3:105:cadvisor", "1:131:hog"]);
    let selected = app.selections[Pane::Feed.index()].key.clone();
    assert_eq!(selected, Some(app.shown.report.stalls[1].id.to_string()));
    // Back: the analysis is rebuilt from the start up to the stall before.
    press(&mut app, KeyCode::Char('N'));
    assert_eq!(feed(&app), ["1:131:hog"]);
    press(&mut app, KeyCode::Char('N'));
    assert!(footer_text(&app).contains("no earlier stall"));
}

#[test]
fn seeking_moves_both_ways() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Char('['));
    let Mode::Replay(r) = &app.mode else {
        panic!("a replay")
    };
    assert_eq!(r.cursor_ns, START);
    assert!(feed(&app).is_empty());
    press(&mut app, KeyCode::Char('.'));
    press(&mut app, KeyCode::Char('.'));
    press(&mut app, KeyCode::Char('.'));
    assert_eq!(feed(&app), ["1:131:hog"]);
    press(&mut app, KeyCode::Char(','));
    press(&mut app, KeyCode::Char(','));
    assert!(feed(&app).is_empty());
}

#[test]
fn filter_by_comm_narrows_every_pane() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "comm:hog");
    assert!(footer_text(&app).contains("comm:hog█"));
    press(&mut app, KeyCode::Enter);
    assert_eq!(feed(&app), ["1:45:hog", "1:131:hog"]);
    assert_eq!(culprit_comms(&app), ["hog"]);
    let header: String = app
        .view()
        .header
        .iter()
        .flatten()
        .map(|s| s.text.as_str())
        .collect();
    assert!(header.contains("filter comm:hog"), "{header}");

    press(&mut app, KeyCode::Char('/'));
    assert!(
        footer_text(&app).contains("comm:hog█"),
        "the filter opens as it was"
    );
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    assert!(footer_text(&app).contains(": █"), "Ctrl-U clears it");
    type_text(&mut app, "cpu:x");
    press(&mut app, KeyCode::Enter);
    assert!(
        footer_text(&app).contains("CPU number"),
        "{}",
        footer_text(&app)
    );
    assert_eq!(feed(&app).len(), 2, "a bad filter leaves the last good one");
}

#[test]
fn picking_cpus_narrows_the_timeline_and_the_feed() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Char('c'));
    type_text(&mut app, "3");
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.rows.cpus, [3]);
    assert_eq!(feed(&app).len(), 3);
    assert!(feed(&app).iter().all(|row| row.starts_with("3:")));
    assert_eq!(app.view().timeline.rows.len(), 1);
    press(&mut app, KeyCode::Char('c'));
    type_text(&mut app, ",9");
    press(&mut app, KeyCode::Enter);
    assert!(footer_text(&app).contains("CPU 9 is not online (online: 0-3)"));
}

#[test]
fn the_threshold_hides_short_stalls_and_says_it_is_display_only() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Char('t'));
    type_text(&mut app, "100ms");
    press(&mut app, KeyCode::Enter);
    assert_eq!(
        feed(&app),
        [
            "3:105:cadvisor",
            "3:105:cadvisor",
            "3:105:cadvisor",
            "1:131:hog"
        ]
    );
    let status = footer_text(&app);
    assert!(status.contains("hiding stalls under 100ms"), "{status}");
    assert!(status.contains("fixed at load"), "{status}");
    assert_eq!(
        app.rows.culprits[1].row.count, 1,
        "hog's 45ms stall is hidden"
    );
}

#[test]
fn sorting_cycles_columns_of_the_focused_table() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Tab);
    assert_eq!(app.focus, Pane::Culprits);
    press(&mut app, KeyCode::Char('s'));
    let table = &app.view().tables[1];
    assert!(
        table.columns.iter().any(|c| c.title == "WORST▼"),
        "{:?}",
        table.columns
    );
    assert_eq!(culprit_comms(&app), ["hog", "cadvisor", "ss"]);
    press(&mut app, KeyCode::Char('<'));
    assert_eq!(culprit_comms(&app), ["cadvisor", "hog", "ss"]);
    press(&mut app, KeyCode::BackTab);
    press(&mut app, KeyCode::BackTab);
    press(&mut app, KeyCode::Char('s'));
    assert!(footer_text(&app).contains("not sortable"));
}

fn live_app() -> App {
    let mut app = App::live(fixtures::header(2), Duration::from_secs(1));
    app.update(Msg::Resize {
        width: 120,
        height: 40,
    });
    app
}

fn hog_stall(at: u64, wait: u64) -> Msg {
    Msg::Entry(Box::new(Entry::Records(runq_record(
        KIND_RUNQ,
        1,
        START + at,
        wait,
        task(300, "victim", 2),
        task(400, "hog", 3),
        None,
        0,
    ))))
}

/// The lines of the open details overlay, as text.
fn overlay_text(app: &App) -> String {
    let overlay = app.view().overlay.clone().expect("details");
    let lines: Vec<String> = overlay
        .lines
        .iter()
        .map(|l| l.iter().map(|s| s.text.as_str()).collect())
        .collect();
    lines.join("\n")
}

#[test]
fn the_details_of_a_wait_moved_between_cpus_say_where_it_began() {
    let mut app = live_app();
    app.update(Msg::Entry(Box::new(Entry::Records(migrated_runq_record(
        1,
        START + S,
        37 * MS,
        task(300, "victim", 2),
        task(400, "hog0", 3),
        0,
        1,
    )))));
    app.update(Msg::Tick {
        now_ns: START + 2 * S,
    });
    press(&mut app, KeyCode::Enter);
    let text = overlay_text(&app);
    for expected in [
        "meanwhile hog0[400] held a CPU it waited on",
        "began on CPU 0, moved 1 time(s) before it ran on CPU 1",
        "37ms",
    ] {
        assert!(text.contains(expected), "{expected} missing in\n{text}");
    }
}

#[test]
fn a_gap_a_hardirq_handler_ran_names_the_handler_in_the_feed_and_the_details() {
    let mut app = live_app();
    let records = [
        hardirq_record(1, START + S, 15 * MS, 25, "eth0-rx-0", task(300, "api", 2)),
        sample_record(1, START + S + MS, task(300, "api", 2), None, 20 * MS, &[]),
    ]
    .concat();
    app.update(Msg::Entry(Box::new(Entry::Records(records))));
    app.update(Msg::Tick {
        now_ns: START + 2 * S,
    });
    press(&mut app, KeyCode::Enter);
    let text = overlay_text(&app);
    for expected in [
        "hardirq handler eth0-rx-0 (irq 25) ran 15ms",
        "with interrupts off: no task held the CPU",
    ] {
        assert!(text.contains(expected), "{expected} missing in\n{text}");
    }
}

#[test]
fn pause_freezes_the_screen_while_the_probes_keep_counting() {
    let mut app = live_app();
    app.update(hog_stall(S, 20 * MS));
    app.update(Msg::Tick {
        now_ns: START + 2 * S,
    });
    assert_eq!(feed(&app).len(), 1);
    press(&mut app, KeyCode::Char('p'));
    let frozen = app.version();
    app.update(hog_stall(3 * S, 30 * MS));
    app.update(Msg::Tick {
        now_ns: START + 4 * S,
    });
    assert_eq!(feed(&app).len(), 1, "paused");
    assert_eq!(app.version(), frozen, "nothing to draw while paused");
    press(&mut app, KeyCode::Char(' '));
    assert_eq!(feed(&app).len(), 2, "counted meanwhile");
}

#[test]
fn a_new_stall_shows_within_a_second_of_ending_whatever_the_refresh() {
    let mut app = App::live(fixtures::header(2), Duration::from_secs(5));
    app.update(Msg::Resize {
        width: 120,
        height: 40,
    });
    app.update(Msg::Tick { now_ns: START + S });
    // Ends at +1.05s; the next refresh would be at +6s.
    app.update(hog_stall(S + 50 * MS, 20 * MS));
    for tick in [1_250, 1_500] {
        app.update(Msg::Tick {
            now_ns: START + tick * MS,
        });
        assert!(feed(&app).is_empty(), "not due yet at +{tick}ms");
    }
    app.update(Msg::Tick {
        now_ns: START + 1_800 * MS,
    });
    assert_eq!(feed(&app).len(), 1, "shown by +1.8s, before +2.05s");
    assert_eq!(app.tick_interval(), Duration::from_millis(250));
}

#[test]
fn the_selection_follows_its_row_as_new_stalls_arrive() {
    let mut app = live_app();
    app.update(hog_stall(S, 20 * MS));
    app.update(hog_stall(2 * S, 21 * MS));
    app.update(Msg::Tick {
        now_ns: START + 3 * S,
    });
    press(&mut app, KeyCode::Down);
    assert_eq!(app.selections[Pane::Feed.index()].index, 1);
    app.update(hog_stall(4 * S, 22 * MS));
    app.update(Msg::Tick {
        now_ns: START + 5 * S,
    });
    assert_eq!(feed(&app), ["1:22:hog", "1:21:hog", "1:20:hog"]);
    assert_eq!(
        app.selections[Pane::Feed.index()].index,
        2,
        "still the 20ms one"
    );
    press(&mut app, KeyCode::Home);
    app.update(hog_stall(6 * S, 23 * MS));
    app.update(Msg::Tick {
        now_ns: START + 7 * S,
    });
    assert_eq!(
        app.view().tables[0].selected,
        Some(0),
        "Home follows the newest"
    );
}

/// A host whose online CPUs are 0-3 and 8: the timeline has a row for
/// CPU 8 (and none for 4-7), and a stall there shows on it.
#[test]
fn every_online_cpu_has_a_timeline_row() {
    let mut header = fixtures::header(5);
    header.host.online = Some(crate::cpulist::CpuList::parse("0-3,8").unwrap());
    let mut app = App::live(header, Duration::from_secs(1));
    app.update(Msg::Resize {
        width: 120,
        height: 40,
    });
    app.update(Msg::Entry(Box::new(Entry::Records(runq_record(
        KIND_RUNQ,
        8,
        START + S,
        20 * MS,
        task(300, "victim", 2),
        task(400, "hog", 3),
        None,
        0,
    )))));
    app.update(Msg::Tick {
        now_ns: START + 2 * S,
    });
    assert_eq!(app.rows.cpus, [0, 1, 2, 3, 8]);
    let cpu8 = app
        .view()
        .timeline
        .rows
        .iter()
        .find(|r| r.label.trim() == "cpu 8")
        .expect("a row for CPU 8");
    assert_eq!(cpu8.summary.text.trim(), "20ms");
    assert_eq!(feed(&app), ["8:20:hog"]);
}

#[test]
fn reset_starts_counting_again() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Char('r'));
    assert!(feed(&app).is_empty());
    assert!(app.rows.culprits.is_empty());
    assert!(footer_text(&app).contains("counters reset at 0:10.0"));
}

#[test]
fn enter_opens_the_full_chain_and_esc_goes_back() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Enter);
    let overlay = app.view().overlay.clone().expect("details");
    assert!(overlay.title.starts_with("Stall #"), "{}", overlay.title);
    let text: Vec<String> = overlay
        .lines
        .iter()
        .map(|l| l.iter().map(|s| s.text.as_str()).collect())
        .collect();
    let all = text.join("\n");
    for expected in [
        "NET_RX+ksoftirqd/3",
        "cadvisor pid 2101",
        "/sys/fs/cgroup/memory/kubepods/cache/memory.stat",
        "148ms of the call's 150ms wall",
        "mem_cgroup_nr_lru_pages",
    ] {
        assert!(all.contains(expected), "{expected} missing in\n{all}");
    }
    for _ in 0..100 {
        press(&mut app, KeyCode::Down);
    }
    let overlay = app.view().overlay.as_ref().expect("still open");
    assert_eq!(
        overlay.scroll, overlay.max_scroll,
        "scrolling stops at the end"
    );
    press(&mut app, KeyCode::Esc);
    assert!(app.view().overlay.is_none());
    press(&mut app, KeyCode::Char('?'));
    assert_eq!(
        app.view().overlay.as_ref().map(|o| o.title.as_str()),
        Some("stalltop keys")
    );
    press(&mut app, KeyCode::Char('x'));
    assert!(app.view().overlay.is_none(), "any key closes help");
    assert!(!app.quitting());
    press(&mut app, KeyCode::Char('q'));
    assert!(app.quitting());
}

#[test]
fn ctrl_c_quits_even_while_typing() {
    let mut app = busy_at_end();
    press(&mut app, KeyCode::Char('/'));
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert!(app.quitting());
}

#[test]
fn the_mouse_focuses_selects_and_scrolls() {
    let mut app = busy_at_end();
    let culprits = app.layout().rect_of(Pane::Culprits).expect("wide layout");
    app.update(Msg::Mouse(MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: culprits.x + 4,
        row: culprits.y + 3,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(app.focus, Pane::Culprits);
    assert_eq!(app.selections[Pane::Culprits.index()].index, 1);
    let feed_rect = app.layout().rect_of(Pane::Feed).expect("wide layout");
    app.update(Msg::Mouse(MouseEvent {
        kind: MouseEventKind::ScrollDown,
        column: feed_rect.x + 4,
        row: feed_rect.y + 4,
        modifiers: KeyModifiers::NONE,
    }));
    assert_eq!(app.selections[Pane::Feed.index()].index, 1);
    assert_eq!(
        app.focus,
        Pane::Culprits,
        "scrolling does not move the focus"
    );
}

#[test]
fn zoom_changes_the_window() {
    let mut app = busy_at_end();
    let title = |app: &App| -> String {
        app.view()
            .timeline
            .title
            .iter()
            .map(|s| s.text.as_str())
            .collect()
    };
    // A replay opens with its whole (10 s) recording on the timeline.
    assert!(
        title(&app).contains("+0.000s to +10.000s of the recording"),
        "{}",
        title(&app)
    );
    press(&mut app, KeyCode::Char('+'));
    assert!(
        title(&app).contains("+5.000s to +10.000s"),
        "{}",
        title(&app)
    );
    for _ in 0..20 {
        press(&mut app, KeyCode::Char('-'));
    }
    assert!(
        title(&app).contains("+0.000s to +1:00:00.000"),
        "{}",
        title(&app)
    );
}
