//! `stalltop replay FILE`: the live view's screens and loop over a
//! recording, in recording time. Reads the file; never probes.

use crate::app::App;
use crate::cli::ReplayArgs;
use crate::failure::Failure;
use crate::record;

pub async fn run(args: &ReplayArgs) -> Result<(), Failure> {
    let recording = record::read(&args.file)
        .map_err(|e| Failure::Recording(format!("{}: {e}", args.file.display())))?;
    if let (Some(damage), true) = (&recording.damage, recording.entries.is_empty()) {
        return Err(Failure::Recording(format!(
            "{}: {damage}; nothing readable after the header",
            args.file.display()
        )));
    }
    let mut app = App::replay(recording, args.delay);
    super::live::run_loop(&mut app, None).await
}
