//! A quiet run against a noisy-neighbour run of the same session
//! (tests/fixtures/quiet.stl, noisy.stl): the diff names the neighbour and
//! the victim's change.

use super::*;
use crate::cmd::report::report_of;
use crate::cmd::report::tests::fixture;
use crate::model::ReportScope;

fn quiet_then_noisy() -> Diff {
    let quiet = report_of(&fixture("quiet"), ReportScope::default());
    let noisy = report_of(&fixture("noisy"), ReportScope::default());
    diff(&quiet, &noisy)
}

#[test]
fn a_noisy_neighbour_is_named_with_the_victims_change() {
    let d = quiet_then_noisy();
    let victim = d
        .containers_named("victim")
        .next()
        .expect("the victim's row");
    let (before, after) = (
        victim.before.as_ref().unwrap(),
        victim.after.as_ref().unwrap(),
    );
    // The victim waited many times longer per second, kept off by another cgroup.
    assert!(victim.wait_change_pct.unwrap() > 500.0, "{victim:?}");
    assert!(
        after.other_cgroup > 10 * before.other_cgroup.max(1),
        "{victim:?}"
    );
    assert_eq!(
        after.top_neighbour.as_deref(),
        Some("hog (/stalltop_noisy)")
    );
    // The neighbour is a culprit new in B, the one with the most stall time.
    let top = &d.culprits[0];
    assert_eq!(
        (top.comm.as_str(), top.container.as_str()),
        ("hog", "/stalltop_noisy")
    );
    assert!(top.before.is_none() && top.after.is_some_and(|s| s.count > 10));
    assert!(d.new_culprits() >= 1);
    assert!(d.stalls("runq", true) > d.stalls("runq", false));
}

#[test]
fn a_diff_of_a_recording_with_itself_changes_nothing() {
    let quiet = report_of(&fixture("quiet"), ReportScope::default());
    let d = diff(&quiet, &quiet);
    assert!(d.containers.iter().all(|c| c.wait_change_pct == Some(0.0)));
    assert_eq!(d.new_culprits(), 0);
}
