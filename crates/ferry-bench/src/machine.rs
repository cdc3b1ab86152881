//! What the report says about the machine a run measured.

use std::path::Path;
use std::process::Command;

use crate::results::Machine;

/// Describes this machine, with `work_dir`'s file system.
pub fn describe(work_dir: &Path) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
        .map(|(_, m)| m.trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_bytes = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB"))
        .and_then(|kib| kib.trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024);
    Machine {
        cpu,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
        memory_bytes,
        kernel: command_line("uname", &["-r"]),
        disk: command_line(
            "findmnt",
            &[
                "-n",
                "-o",
                "FSTYPE,SOURCE",
                "--target",
                &work_dir.to_string_lossy(),
            ],
        ),
        load_at_start: std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
        rustc: command_line("rustc", &["--version"]),
        started_at: command_line("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        commit: command_line("git", &["rev-parse", "--short", "HEAD"]),
    }
}

/// The first line `program args` prints, or "unknown".
fn command_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        })
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}
