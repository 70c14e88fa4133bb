//! Bounded `container` label values: at most `max` containers have series
//! of their own, the rest share `container="other"`. The places go to the
//! containers that waited most recently: a newcomer takes the place of a
//! container that is gone (its cgroups were removed), else of the one idle
//! longest once it has been idle for `IDLE_NS`. A gone container's series
//! stay for `LINGER_NS` after its removal, so a scrape sees their last
//! counts, then end (Prometheus marks them stale), unless a newcomer needs
//! the place first. A container keeps its label while it is active, so its
//! counters never move between series (a counter that moved would read as
//! a reset).

use std::collections::HashMap;

/// The label of every container without a series of its own.
pub const OTHER: &str = "other";
/// How long a live container must have been idle before a newcomer takes
/// its place: long enough that containers busier than the cap allows do
/// not trade places (and restart their series) at every snapshot.
pub const IDLE_NS: u64 = 60 * 1_000_000_000;
/// How long a gone container's series stay: one scrape at any interval up
/// to a minute sees its last counts.
pub const LINGER_NS: u64 = 60 * 1_000_000_000;

pub struct ContainerLabels {
    max: usize,
    /// Containers with series of their own.
    own: HashMap<String, Place>,
}

#[derive(Clone, Copy, Debug)]
struct Place {
    last_active_ns: u64,
    /// When its last cgroup was found removed (and nothing ran since).
    gone_ns: Option<u64>,
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
        if let Some(place) = self.own.get_mut(container) {
            // Active again (a restarted container reuses its label): not gone.
            *place = Place {
                last_active_ns: now_ns,
                gone_ns: None,
            };
            return own(container, None);
        }
        let evicted = if self.own.len() < self.max {
            None
        } else {
            match self.place_to_give(now_ns) {
                Some(name) => {
                    self.own.remove(&name);
                    Some(name)
                }
                None => {
                    return Assigned {
                        label: OTHER.to_owned(),
                        evicted: None,
                    }
                }
            }
        };
        self.own.insert(
            container.to_owned(),
            Place {
                last_active_ns: now_ns,
                gone_ns: None,
            },
        );
        own(container, evicted)
    }

    /// `container`'s cgroups were all removed at `now_ns`.
    pub fn gone(&mut self, container: &str, now_ns: u64) {
        if let Some(place) = self.own.get_mut(container) {
            place.gone_ns.get_or_insert(now_ns);
        }
    }

    /// The gone containers whose series have lingered long enough: their
    /// places are free and their series end.
    pub fn expire(&mut self, now_ns: u64) -> Vec<String> {
        let mut expired: Vec<String> = self
            .own
            .iter()
            .filter(|(_, p)| {
                p.gone_ns
                    .is_some_and(|g| now_ns.saturating_sub(g) >= LINGER_NS)
            })
            .map(|(name, _)| name.clone())
            .collect();
        expired.sort();
        for name in &expired {
            self.own.remove(name);
        }
        expired
    }

    /// The place a newcomer may take: the container gone longest, else the
    /// one idle longest if idle for `IDLE_NS`.
    fn place_to_give(&self, now_ns: u64) -> Option<String> {
        let gone = self
            .own
            .iter()
            .filter_map(|(name, p)| p.gone_ns.map(|g| (g, name)))
            .min();
        if let Some((_, name)) = gone {
            return Some(name.clone());
        }
        self.own
            .iter()
            .map(|(name, p)| (p.last_active_ns, name))
            .min()
            .filter(|(last, _)| now_ns.saturating_sub(*last) >= IDLE_NS)
            .map(|(_, name)| name.clone())
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

    const S: u64 = 1_000_000_000;

    #[test]
    fn busy_containers_past_the_limit_share_other_and_keep_their_places() {
        let mut labels = ContainerLabels::new(2);
        assert_eq!(labels.assign("pod:a", 0).label, "pod:a");
        assert_eq!(labels.assign("pod:b", 0).label, "pod:b");
        for t in 1..=5 {
            // All three keep waiting: nobody is idle long enough to give way.
            assert_eq!(labels.assign("pod:a", t * 30 * S).label, "pod:a");
            assert_eq!(labels.assign("pod:b", t * 30 * S).label, "pod:b");
            assert_eq!(labels.assign("pod:c", t * 30 * S).label, OTHER);
        }
    }

    #[test]
    fn a_newcomer_takes_the_place_of_the_container_idle_longest() {
        let mut labels = ContainerLabels::new(2);
        labels.assign("pod:a", 0);
        labels.assign("pod:b", 20 * S);
        // pod:a has been idle 59 s: not yet.
        assert_eq!(labels.assign("pod:c", 59 * S).label, OTHER);
        let taken = labels.assign("pod:c", 60 * S);
        assert_eq!(
            taken,
            Assigned {
                label: "pod:c".into(),
                evicted: Some("pod:a".into())
            }
        );
        // pod:b idle a minute: the next newcomer, pod:a again, takes its place.
        assert_eq!(labels.assign("pod:a", 80 * S).evicted, Some("pod:b".into()));
    }

    #[test]
    fn a_gone_container_gives_its_place_at_once_and_its_series_end_after_the_linger() {
        let mut labels = ContainerLabels::new(2);
        labels.assign("pod:a", 0);
        labels.assign("pod:b", 0);
        labels.gone("pod:a", S);
        assert!(labels.expire(S + LINGER_NS - 1).is_empty(), "still lingers");
        assert_eq!(labels.expire(S + LINGER_NS), vec!["pod:a".to_string()]);
        assert_eq!(labels.own.len(), 1);
        assert_eq!(labels.assign("pod:c", S + LINGER_NS).evicted, None);

        // A newcomer before the linger ends takes the gone one's place
        // (the one gone first), though the live one is idle longer.
        labels.gone("pod:c", 70 * S);
        assert_eq!(labels.assign("pod:d", 71 * S).evicted, Some("pod:c".into()));
    }

    #[test]
    fn a_container_active_again_is_no_longer_gone() {
        let mut labels = ContainerLabels::new(1);
        labels.assign("ns/pod/app", 0);
        labels.gone("ns/pod/app", S);
        // Restarted: a new cgroup under the same label.
        assert_eq!(labels.assign("ns/pod/app", 2 * S).label, "ns/pod/app");
        assert!(labels.expire(2 * S + LINGER_NS).is_empty());
        assert_eq!(labels.assign("pod:x", 3 * S).label, OTHER);
    }

    #[test]
    fn ten_short_lived_containers_then_a_live_one_leave_the_live_one_named() {
        let mut labels = ContainerLabels::new(5);
        for i in 0..10u64 {
            let name = format!("/zq_pod{i}");
            labels.assign(&name, i * 2 * S);
            labels.gone(&name, i * 2 * S + S);
        }
        assert_eq!(labels.assign("/zq_live", 21 * S).label, "/zq_live");
        labels.assign("/zq_live", 21 * S + LINGER_NS);
        let left: Vec<String> = labels.expire(21 * S + LINGER_NS);
        assert_eq!(left.len(), 4, "{left:?}");
        assert_eq!(labels.own.len(), 1);
    }
}
