//! stalltop: find the CPU stalls your application did not cause.

mod cgroup;
mod histogram;
mod probe;
mod record;
mod stream;

fn main() {
    println!("{}", std::mem::size_of::<probe::skel::types::runq_event>());
}
