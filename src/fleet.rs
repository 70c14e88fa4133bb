//! Fleet mode (`stalltop serve`): what a node exports while it runs
//! unattended. Pure: cumulative totals from the entry stream (`totals`),
//! bounded container labels (`labels`), stall counting and flight triggers
//! (`stall_watch`), the metric families (`families`) and their encodings
//! (`exposition`), the flight window and its dump plans (`flight`), and the
//! node state that ties them together (`node`). I/O: the HTTP server
//! (`http`) and the flight directory (`flight_dir`).

pub mod exposition;
pub mod families;
pub mod flight;
pub mod flight_dir;
pub mod http;
pub mod labels;
pub mod node;
pub mod stall_watch;
pub mod totals;
