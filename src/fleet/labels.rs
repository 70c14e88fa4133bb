//! Bounded `container` label values: at most `max` containers get a series
//! of their own, in the order they show activity; the rest share
//! `container="other"`. A container keeps its label while it is active, so
//! its counters never move between series (a counter that moved would read
//! as a reset); one idle for `IDLE_EVICTION_NS` gives its place up to the
//! next newcomer, and its series end.

use std::collections::HashMap;

/// The label of every container without a series of its own.
pub const OTHER: &str = "other";
/// How long a container must have been idle before a newcomer takes its
/// place: pods that ended free theirs, a quiet one keeps it a while.
pub const IDLE_EVICTION_NS: u64 = 10 * 60 * 1_000_000_000;

pub struct ContainerLabels {
    max: usize,
    /// Containers with a series of their own -> when they were last active.
    own: HashMap<String, u64>,
}

/// The label a container's activity counts under, and the container whose
/// series ended to make room for it.
#[derive(Debug, PartialEq, Eq)]
pub struct Assigned {
    pub label: String,
    pub evicted: Option<String>,
}

impl ContainerLabels {
    pub fn new(max: usize) -> ContainerLabels {
        ContainerLabels {
            max,
            own: HashMap::new(),
        }
    }

    /// The label for activity of `container` seen at `now_ns`.
    pub fn assign(&mut self, container: &str, now_ns: u64) -> Assigned {
        if let Some(last) = self.own.get_mut(container) {
            *last = now_ns;
            return own(container, None);
        }
        if self.own.len() < self.max {
            self.own.insert(container.to_owned(), now_ns);
            return own(container, None);
        }
        let idlest = self
            .own
            .iter()
            .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
            .map(|(name, last)| (name.clone(), *last));
        match idlest {
            Some((name, last)) if now_ns.saturating_sub(last) >= IDLE_EVICTION_NS => {
                self.own.remove(&name);
                self.own.insert(container.to_owned(), now_ns);
                own(container, Some(name))
            }
            _ => Assigned {
                label: OTHER.to_owned(),
                evicted: None,
            },
        }
    }
}

fn own(container: &str, evicted: Option<String>) -> Assigned {
    Assigned {
        label: container.to_owned(),
        evicted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60 * 1_000_000_000;

    #[test]
    fn containers_past_the_limit_share_other_and_keep_it() {
        let mut labels = ContainerLabels::new(2);
        assert_eq!(labels.assign("pod:a", 0).label, "pod:a");
        assert_eq!(labels.assign("pod:b", 0).label, "pod:b");
        assert_eq!(labels.assign("pod:c", MIN).label, OTHER);
        // Still active: nobody gives up a place.
        assert_eq!(labels.assign("pod:a", 2 * MIN).label, "pod:a");
        assert_eq!(labels.assign("pod:b", 2 * MIN).label, "pod:b");
        assert_eq!(labels.assign("pod:c", 3 * MIN).label, OTHER);
    }

    #[test]
    fn a_container_idle_long_enough_gives_its_place_to_a_newcomer() {
        let mut labels = ContainerLabels::new(2);
        labels.assign("pod:a", 0);
        labels.assign("pod:b", 5 * MIN);
        // pod:a idle 9 minutes: not yet.
        assert_eq!(labels.assign("pod:c", 9 * MIN).label, OTHER);
        let taken = labels.assign("pod:c", 10 * MIN);
        assert_eq!(
            taken,
            Assigned {
                label: "pod:c".into(),
                evicted: Some("pod:a".into())
            }
        );
        // pod:a came back: the places are taken by active containers.
        assert_eq!(labels.assign("pod:a", 11 * MIN).label, OTHER);
    }
}
