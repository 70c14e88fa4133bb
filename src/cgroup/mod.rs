//! cgroup attribution (in progress).
