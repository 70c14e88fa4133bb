//! Snapshots of every screen, drawn into a `TestBackend` from replayed
//! fixture recordings (src/app/fixtures.rs and tests/fixtures/). Each test
//! also asserts the content that makes the screen useful, so a snapshot
//! accepted without reading still cannot lose the stall or the culprit.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::style::{Color, Modifier};
use ratatui::Terminal;

use super::render;
use crate::app::fixtures::{self, S, START};
use crate::app::{App, Msg};
use crate::record::Recording;

fn press(app: &mut App, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

fn type_text(app: &mut App, text: &str) {
    for c in text.chars() {
        press(app, KeyCode::Char(c));
    }
}

/// A replay of `recording` at its end, on a `width` x `height` screen.
fn replay_at_end(recording: Recording, width: u16, height: u16) -> App {
    let mut app = App::replay(recording, Duration::from_secs(1));
    app.update(Msg::Resize { width, height });
    press(&mut app, KeyCode::Char('G'));
    app
}

fn draw(app: &App) -> Terminal<TestBackend> {
    let area = app.layout().header.union(app.layout().footer);
    let mut terminal =
        Terminal::new(TestBackend::new(area.width, area.bottom())).expect("test terminal");
    terminal.draw(|frame| render(frame, app)).expect("draw");
    terminal
}

fn screen(app: &App) -> String {
    draw(app).backend().to_string()
}

fn assert_shows(screen: &str, expected: &[&str]) {
    for text in expected {
        assert!(
            screen.contains(text),
            "`{text}` is not on screen:\n{screen}"
        );
    }
}

#[test]
fn empty_recording() {
    let app = replay_at_end(fixtures::empty(), 80, 24);
    let s = screen(&app);
    assert_shows(
        &s,
        &[
            "node-7",
            "REPLAY paused",
            "cpu 0",
            "cpu 1",
            "no stalls over 10ms yet",
            "lost 0",
        ],
    );
    insta::assert_snapshot!(s);
}

#[test]
fn busy_wide() {
    let app = replay_at_end(fixtures::busy(), 200, 50);
    let s = screen(&app);
    assert_shows(
        &s,
        &[
            // header: host, state, rates, own cost
            "node-7",
            "kernel 5.4.0-150-generic",
            "4 CPUs",
            "at +10.000s 22:30:10.000Z of 0:10.0",
            "events 50.0k/s",
            "probe cost 300ns/event 1.50% CPU",
            // timeline: the stalled CPUs and their worst stall
            "cpu 3",
            "131ms",
            // feed: the cadvisor chain (case 1) and the hog (case 4)
            "NET_RX+ksoftirqd/3",
            "cadvisor[2101] cadvisor.service",
            "api-worker[300]",
            "hog[400] batch.service",
            // culprits: three cgroups' memory.stat collapsed into one row
            "read › /sys/fs/cgroup/mem",
            // containers: runq percentiles, the largest cause of the wait, neighbour, throttling
            "pod:0f1e2d3c/4c5f7e9a1b2c",
            "75% other",
            "×660 hog",
            "40.0",
            // syscalls: fadvise64 tops kernel time (case 5)
            "fadvise64",
            "/var/log/shop/",
        ],
    );
    insta::assert_snapshot!(s);
}

#[test]
fn busy_narrow_every_pane() {
    let expected: [&[&str]; 4] = [
        &["Stalls & takeovers", "cadvisor[2101]", "105ms"],
        &["COMM", "cadvisor", "hog", "ss"],
        &["pod:0f1e2d3c/4c5f7e9a1b2c", "×660 hog"],
        &["fadvise64", "4.20s"],
    ];
    // The feed shows first; Tab walks culprits, containers, syscalls.
    let mut app = replay_at_end(fixtures::busy(), 80, 24);
    let mut screens = Vec::new();
    for (i, want) in expected.iter().enumerate() {
        if i > 0 {
            press(&mut app, KeyCode::Tab);
        }
        let s = screen(&app);
        assert_shows(&s, want);
        for line in s.lines() {
            assert_eq!(
                line.chars().count(),
                82,
                "80 columns and the quotes: {line}"
            );
        }
        screens.push(s);
    }
    insta::assert_snapshot!(screens.join("\n"));
}

/// The first screen answers without a key, at 120x40 and at 80x24: before
/// any wait crossed the threshold, the stall pane lists the worst waits
/// with who held the CPU, marked as under it, above the containers with
/// their neighbours; epoll_pwait's seconds of waiting are no worst syscall.
#[test]
fn first_screen_names_the_hog_under_the_threshold() {
    let mut screens = Vec::new();
    for (width, height) in [(120, 40), (80, 24)] {
        let app = replay_at_end(fixtures::hog_under_threshold(), width, height);
        let s = screen(&app);
        assert_shows(
            &s,
            &[
                "· none over 10ms yet: the worst waits so far",
                "6.2ms",
                "runq<10ms",
                "/stalltop_victim",
                "hog /stalltop_noisy ×82",
                "[Containers]",
                "×82 hog",
            ],
        );
        // The worst syscall column fits from 120 columns.
        assert_eq!(s.contains("read 2ms"), width >= 120, "{s}");
        assert!(
            !s.contains("epoll"),
            "a wait by design as a worst syscall:\n{s}"
        );
        screens.push(s);
    }
    insta::assert_snapshot!(screens.join("\n"));
}

/// Once stalls are recorded, the first screen shows them above the culprits.
#[test]
fn first_screen_shows_stalls_above_culprits() {
    for (width, height) in [(120, 40), (80, 24)] {
        let s = screen(&replay_at_end(fixtures::busy(), width, height));
        assert_shows(
            &s,
            &[
                "Stalls & takeovers",
                "cadvisor[2101]",
                "[Culprits]",
                "COMM",
                "TOTAL▼",
                "cadvisor.servic",
                "batch.service",
            ],
        );
    }
}

#[test]
fn detail_popup_of_a_worst_wait() {
    let mut app = replay_at_end(fixtures::hog_under_threshold(), 120, 40);
    press(&mut app, KeyCode::Enter);
    let s = screen(&app);
    assert_shows(
        &s,
        &[
            "Worst wait of /stalltop_victim",
            "6.2ms, under the 10ms threshold",
            "another cgroup 164",
            "×82        hog in /stalltop_noisy",
        ],
    );
    insta::assert_snapshot!(s);
}

/// A live view of the busy node, 120x30, whose last snapshot is `last`,
/// a second after it.
fn busy_app_ending_with(header: crate::stream::Header, last: crate::stream::Entry) -> App {
    let mut app = App::live(header, Duration::from_secs(1));
    app.update(Msg::Resize {
        width: 120,
        height: 30,
    });
    for entry in fixtures::busy_entries() {
        app.update(Msg::Entry(Box::new(entry)));
    }
    app.update(Msg::Entry(Box::new(last)));
    app.update(Msg::Tick {
        now_ns: START + 12 * S,
    });
    app
}

#[test]
fn header_over_budget_names_the_steps_down() {
    let app = busy_app_ending_with(fixtures::header(4), fixtures::over_budget_kernel(11 * S));
    let terminal = draw(&app);
    let s = terminal.backend().to_string();
    assert_shows(
        &s,
        &["OVER BUDGET 2.5%/2.0%: exact syscalls sampled, stacks off"],
    );
    let (y, line) = s
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("OVER BUDGET"))
        .expect("on screen");
    let x = line[..line.find("OVER BUDGET").unwrap()].chars().count() - 1;
    assert_eq!(
        terminal.backend().buffer()[(x as u16, y as u16)].fg,
        Color::Yellow
    );
}

#[test]
fn header_with_warnings_and_lost_events() {
    let header = crate::stream::Header {
        warnings: vec![
            "CPU X-ray sampler is off: perf_event_open: No such file or directory".into(),
        ],
        ..fixtures::header(4)
    };
    let app = busy_app_ending_with(header, fixtures::lossy_kernel(11 * S));
    let terminal = draw(&app);
    let s = terminal.backend().to_string();
    assert_shows(
        &s,
        &[
            "● LIVE",
            "up 0:12.0",
            "LOST runq 17 sample 3",
            "MAP FULL tasks 2",
            "⚠ CPU X-ray sampler is off",
        ],
    );
    // Losses are red, the warning yellow.
    let buffer = terminal.backend().buffer();
    let find = |text: &str| {
        let (y, line) = s
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(text))
            .expect("on screen");
        let x = line.find(text).expect("found") - 1; // the leading quote
        let x = line[..x + 1].chars().count() - 1;
        &buffer[(x as u16, y as u16)]
    };
    assert_eq!(find("LOST").fg, Color::Red);
    assert!(find("LOST").modifier.contains(Modifier::BOLD));
    assert_eq!(find("⚠").fg, Color::Yellow);
    insta::assert_snapshot!(s);
}

#[test]
fn help_overlay_lists_every_key() {
    let mut app = replay_at_end(fixtures::busy(), 100, 40);
    press(&mut app, KeyCode::Char('?'));
    let s = screen(&app);
    assert_shows(
        &s,
        &[
            "stalltop keys",
            "quit",
            "details",
            "sort",
            "filter",
            "pick CPUs",
            "pause",
            "zoom",
            "reset",
            "display only",
            "next / previous stall",
            "seek 10s",
        ],
    );
    insta::assert_snapshot!(s);
}

#[test]
fn detail_popup_of_a_stall() {
    let mut app = replay_at_end(fixtures::busy(), 120, 44);
    press(&mut app, KeyCode::Enter);
    let s = screen(&app);
    assert_shows(
        &s,
        &[
            "Stall #",
            "on CPU 3",
            "Timeline",
            "ksoftirqd/3",
            "cadvisor pid 2101 tid 2101",
            "cadvisor.service",
            "doing      read",
            "/sys/fs/cgroup/memory/kubepods/cache/memory.stat",
            "148ms of the call's 150ms wall",
            "mem_cgroup_nr_lru_pages",
            "memcg_stat_show",
        ],
    );
    insta::assert_snapshot!(s);
}

/// A stall whose culprit had no sample of its own: the popup shows the stack
/// the CPU's tick found, named as that task's.
#[test]
fn detail_popup_names_a_stack_that_is_not_the_culprits() {
    let mut app = replay_at_end(fixtures::stack_of_another_task(), 120, 40);
    press(&mut app, KeyCode::Enter);
    let s = screen(&app);
    assert_shows(
        &s,
        &[
            "openssl pid 900 tid 900",
            "stacks of  kworker/0:1 (tid 77), on CPU 0 then: the culprit has no sample of its own",
            "get_slabinfo",
        ],
    );
}

/// The busy fixture filtered by `filter`, with the newest stall left opened.
fn details_of_newest_stall(filter: &str) -> String {
    let mut app = replay_at_end(fixtures::busy(), 120, 44);
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, filter);
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Enter);
    screen(&app)
}

#[test]
fn detail_popup_of_an_irqs_off_stall() {
    let s = details_of_newest_stall("comm:ss");
    assert_shows(
        &s,
        &[
            "irqs-off 38ms on CPU 2",
            "interrupts went off",
            "ss pid 3300",
            "/proc/slabinfo",
            "get_slabinfo",
        ],
    );
    insta::assert_snapshot!(s);
}

#[test]
fn detail_popup_of_a_wait_the_hypervisor_stretched() {
    let s = details_of_newest_stall("comm:api-worker");
    assert_shows(
        &s,
        &[
            "runq 45ms on CPU 1",
            "api-worker pid 300",
            "waited     45ms",
            "host took  6ms of it (hypervisor steal)",
            "hog pid 400",
        ],
    );
    insta::assert_snapshot!(s);
}

/// Case 3: the wait its pod's quota explains names the quota, not node-exporter, which only
/// filled the CPU meanwhile.
#[test]
fn detail_popup_of_a_throttled_stall() {
    let s = details_of_newest_stall("comm:shop-api");
    assert_shows(
        &s,
        &[
            "throttled 62ms on CPU 0",
            "out of CPU quota",
            "shop-api pid 5151",
            "Cause",
            "throttled by its CPU quota (800ms / 100ms)",
        ],
    );
    assert!(!s.contains("node-exporter"), "a bystander is blamed:\n{s}");
    insta::assert_snapshot!(s);
}

#[test]
fn detail_popups_of_a_culprit_a_container_and_a_syscall() {
    let mut app = replay_at_end(fixtures::busy(), 120, 44);
    let mut screens = Vec::new();
    let expected: [&[&str]; 3] = [
        &[
            "Culprit cadvisor",
            "/sys/fs/cgroup/memory/kubepods/*/memory.stat",
            "3 caused",
            "Worst stall",
            "NET_RX+ksoftirqd/3",
        ],
        &[
            "Container pod:0f1e2d3c",
            "kept off",
            "hog in /system.slice/batch.service",
        ],
        &[
            "Syscall fadvise64",
            "/var/log/shop/shop.INFO",
            "4.20s in the kernel",
        ],
    ];
    for want in expected {
        press(&mut app, KeyCode::Tab);
        press(&mut app, KeyCode::Enter);
        let s = screen(&app);
        assert_shows(&s, want);
        screens.push(s);
        press(&mut app, KeyCode::Esc);
    }
    insta::assert_snapshot!(screens.join("\n"));
}

#[test]
fn filtered_and_zoomed() {
    let mut app = replay_at_end(fixtures::busy(), 160, 40);
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "comm:hog");
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Char('+'));
    press(&mut app, KeyCode::Char('+'));
    let s = screen(&app);
    assert_shows(
        &s,
        &["filter comm:hog", "+5.000s to +10.000s", "api-worker[300]"],
    );
    assert!(!s.contains("cadvisor[2101]"), "filtered out:\n{s}");
    insta::assert_snapshot!(s);
}

/// `container:X` opens with what hurt X: X's stalls, and the culprits
/// recounted over them (the hog of another cgroup), not X's own tasks.
#[test]
fn a_container_filter_lists_who_hurt_it() {
    let mut app = replay_at_end(fixtures::noisy_neighbour(), 160, 48);
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "container:victim");
    press(&mut app, KeyCode::Enter);
    let s = screen(&app);
    let culprits: Vec<&str> = s
        .lines()
        .skip_while(|l| !l.contains("COMM"))
        .skip(1)
        .take_while(|l| !l.contains('└'))
        .collect();
    let hog = culprits
        .iter()
        .find(|l| l.contains("hog") && l.contains("/stalltop_noisy"))
        .unwrap_or_else(|| panic!("the hog of /stalltop_noisy is not a culprit:\n{s}"));
    // Counted over the stalls the victim is shown waiting in: 94 of the hog's 97.
    assert!(hog.contains(" 94 "), "{hog}");
}

/// The real slow-syscall recording: the Syscalls pane's madvise row opens on
/// its slow call with its caller and the kernel functions it ran in.
#[test]
fn a_real_slow_call_opens_with_its_caller_and_stack() {
    let mut app = replay_at_end(fixtures::slow_syscall(), 160, 48);
    for _ in 0..3 {
        press(&mut app, KeyCode::Tab);
    }
    // The madvise row, wherever the table sorts it.
    let mut s = String::new();
    for _ in 0..10 {
        press(&mut app, KeyCode::Enter);
        s = screen(&app);
        if s.contains("Syscall madvise") {
            break;
        }
        press(&mut app, KeyCode::Esc);
        press(&mut app, KeyCode::Down);
    }
    assert_shows(
        &s,
        &["Syscall madvise", "setup", "2.60s", "clear_page_erms"],
    );
}

#[test]
fn real_noisy_neighbour_recording() {
    let mut app = replay_at_end(fixtures::noisy_neighbour(), 160, 48);
    let s = screen(&app);
    assert_shows(
        &s,
        &[
            "REPLAY",
            "victim",
            "hog",
            "/stalltop_victim",
            "/stalltop_noisy",
        ],
    );
    // A stall between the victim and the hog: both named, with their cgroups.
    press(&mut app, KeyCode::Char('/'));
    type_text(&mut app, "comm:victim comm:hog");
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Enter);
    let stall = screen(&app);
    assert_shows(
        &stall,
        &[
            "Stall #",
            "What waited",
            "victim",
            "hog pid",
            "/stalltop_victim",
            "/stalltop_noisy",
        ],
    );
    // The hog as a culprit.
    press(&mut app, KeyCode::Esc);
    press(&mut app, KeyCode::Char('/'));
    app.update(Msg::Key(KeyEvent::new(
        KeyCode::Char('u'),
        KeyModifiers::CONTROL,
    )));
    type_text(&mut app, "comm:hog");
    press(&mut app, KeyCode::Enter);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Enter);
    let culprit = screen(&app);
    assert_shows(&culprit, &["Culprit hog", "/stalltop_noisy", "caused"]);
    insta::assert_snapshot!([s, stall, culprit].join("\n"));
}

/// The detail of `recording`'s worst stall in replay: `w`, then Enter.
fn worst_stall_of(recording: Recording) -> String {
    let mut app = replay_at_end(recording, 160, 48);
    press(&mut app, KeyCode::Char('w'));
    press(&mut app, KeyCode::Enter);
    screen(&app)
}

/// The real throttle recording in replay: the worst stall (`w`) is a
/// request thread its group's CPU quota held back, and says so with the quota.
#[test]
fn real_throttle_recording_opens_its_worst_stall_on_the_quota() {
    let stall = worst_stall_of(fixtures::throttle_scenario());
    assert_shows(
        &stall,
        &[
            "Stall #",
            "throttled ",
            "burstreq pid",
            "/stalltop_throttled",
            "throttled by its CPU quota (15ms / 100ms)",
        ],
    );
    insta::assert_snapshot!(stall);
}

/// The real ksoftirqd recording in replay: the worst stall (`w`) is
/// ksoftirqd/1 kept waiting on CPU 1, held by the hog of /stalltop_hog, as
/// the whole recording has it (signals merged in after the stall first
/// appeared change its kind: the cursor goes to where it took its last).
#[test]
fn real_ksoftirqd_recording_opens_its_worst_stall_on_the_hog() {
    let stall = worst_stall_of(fixtures::ksoftirqd_scenario());
    assert_shows(
        &stall,
        &[
            "Stall #",
            "on CPU 1",
            "ksoftirqd/1",
            "hog pid",
            "/stalltop_hog",
        ],
    );
    insta::assert_snapshot!(stall);
}

#[test]
fn any_size_draws_without_panicking() {
    let mut app = replay_at_end(fixtures::busy(), 80, 24);
    press(&mut app, KeyCode::Enter);
    for (width, height) in [
        (0, 0),
        (1, 1),
        (10, 3),
        (40, 10),
        (79, 23),
        (80, 24),
        (81, 60),
        (159, 48),
        (160, 9),
        (400, 120),
    ] {
        app.update(Msg::Resize { width, height });
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("test terminal");
        terminal.draw(|frame| render(frame, &app)).expect("draw");
    }
    // A terminal that shrank before the Resize arrived is clipped, not overrun.
    app.update(Msg::Resize {
        width: 200,
        height: 60,
    });
    let mut terminal = Terminal::new(TestBackend::new(50, 10)).expect("test terminal");
    terminal.draw(|frame| render(frame, &app)).expect("draw");
}
