//! `ferry migrate connector`: one connector moved from a source cluster to a target cluster.
//!
//! Before anything changes: the connector exists on the source (a source connector), the target has
//! none of that name, and the target's validation accepts the configuration. Then:
//!
//! 1. the source stops it (`PUT /connectors/N/stop`, KIP-875) and the move waits for STOPPED: its
//!    tasks are gone and their last offsets committed;
//! 2. its offsets are read (`GET /connectors/N/offsets`);
//! 3. the target creates it STOPPED (`POST /connectors` with `initial_state`, KIP-980) with the
//!    configuration as the source stores it (config provider placeholders kept);
//! 4. the target's offsets are made the source's: found equal (both read one offsets topic), or
//!    written (`PATCH`, every other partition the target holds set to null) and read back;
//! 5. the target resumes it and the move waits for RUNNING, then for its first commit of new
//!    offsets (a sign it reads and delivers; an idle source commits nothing new, which is said);
//! 6. with `--delete-source`, the source deletes it (its offsets stay where they are).
//!
//! A failure from step 1 on rolls back, each step on its own so one failing does not stop the
//! others: if the target ran it, the target stops it and its progress is written back to the
//! source's offsets (unless they share them), so the source resumes after the target's last commit;
//! the target's copy is deleted, with the offsets the move wrote there reset; the source gets back
//! the state it had (RUNNING, PAUSED or STOPPED). The source's offsets are never written otherwise.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::MigrateError;
use super::client::{Reply, Rest};

/// How often a wait asks again.
const POLL: Duration = Duration::from_millis(250);

/// The move's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    pub(crate) delete_source: bool,
    pub(crate) dry_run: bool,
    pub(crate) timeout: Duration,
    pub(crate) commit_timeout: Duration,
}

/// A connector's offsets: partition → offset, both as JSON text (maps compared by value).
type Offsets = BTreeMap<String, Value>;

/// What the move changed so far: what a rollback undoes.
#[derive(Debug, Default)]
struct Done {
    /// The source's state before the move (`RUNNING`, `PAUSED`, `STOPPED`), once stopped.
    stopped_from: Option<String>,
    /// The source's offsets when stopped.
    source_offsets: Option<Offsets>,
    created_on_target: bool,
    /// The target's offsets were written (not shared with the source).
    patched_target: bool,
    resumed_on_target: bool,
}

/// One move.
pub(crate) struct Move<'a, W: Write> {
    name: &'a str,
    source: &'a Rest,
    target: &'a Rest,
    options: Options,
    out: &'a mut W,
    done: Done,
}

impl<'a, W: Write> Move<'a, W> {
    pub(crate) fn new(
        name: &'a str,
        source: &'a Rest,
        target: &'a Rest,
        options: Options,
        out: &'a mut W,
    ) -> Self {
        Self {
            name,
            source,
            target,
            options,
            out,
            done: Done::default(),
        }
    }

    fn say(&mut self, line: impl AsRef<str>) {
        // Progress is best effort: a closed stdout must not stop a move half-way.
        let _ = writeln!(self.out, "{}", line.as_ref());
        let _ = self.out.flush();
    }

    fn path(&self, tail: &str) -> String {
        format!("/connectors/{}{tail}", self.name)
    }

    /// Runs the move.
    ///
    /// # Errors
    /// Refused before any change (nothing was touched), or failed after (rolled back; the error
    /// says what the rollback did).
    pub(crate) fn run(mut self) -> Result<(), MigrateError> {
        let config = self.preflight().map_err(|e| match e {
            MigrateError::Move(message) => MigrateError::Move(message),
            other => MigrateError::Move(format!("{other}; nothing was changed")),
        })?;
        if self.options.dry_run {
            self.say(format!(
                "dry run: would stop {n} on {s}, copy its offsets, create it STOPPED on {t}, resume it there{d}; nothing was changed",
                n = self.name,
                s = self.source.url(),
                t = self.target.url(),
                d = if self.options.delete_source {
                    ", then delete it on the source"
                } else {
                    ""
                }
            ));
            return Ok(());
        }
        match self.transfer(&config) {
            Ok(()) => Ok(()),
            Err(failure) => {
                self.say(format!("FAILED: {failure}; rolling back"));
                let report = self.roll_back();
                Err(MigrateError::Move(format!(
                    "moving {} failed: {failure}. Rollback: {report}",
                    self.name
                )))
            }
        }
    }

    /// Checks both ends; returns the source's configuration. Changes nothing.
    fn preflight(&mut self) -> Result<Value, MigrateError> {
        let info = expect(
            self.source,
            "GET",
            &self.path(""),
            self.source.get(&self.path(""))?,
            &[200],
        )?;
        let info = info.json();
        if info["type"].as_str().is_some_and(|t| t != "source") {
            return Err(MigrateError::Move(format!(
                "{} on {} is a {} connector: only source connectors move; nothing was changed",
                self.name,
                self.source.url(),
                info["type"].as_str().unwrap_or("?")
            )));
        }
        let config = info["config"].clone();
        let class = config["connector.class"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let state = self.state(self.source)?;
        self.say(format!(
            "source {}: {} ({class}) is {}",
            self.source.url(),
            self.name,
            state.as_deref().unwrap_or("without a status")
        ));
        let existing = self.target.get(&self.path(""))?;
        if existing.status != 404 {
            return Err(MigrateError::Move(format!(
                "the target {} already has a connector {} (GET answered {}): delete it there first; nothing was changed",
                self.target.url(),
                self.name,
                existing.status
            )));
        }
        let validate = format!(
            "/connector-plugins/{}/config/validate",
            class.rsplit('.').next().unwrap_or(&class)
        );
        let reply = expect(
            self.target,
            "PUT",
            &validate,
            self.target.put(&validate, Some(&config))?,
            &[200],
        )?;
        let errors = validation_errors(&reply.json());
        if !errors.is_empty() {
            self.say(format!(
                "target {} refuses the configuration:",
                self.target.url()
            ));
            for error in &errors {
                self.say(format!("  - {error}"));
            }
            return Err(MigrateError::Move(format!(
                "the target {} refuses {}'s configuration ({} problems, above); nothing was changed",
                self.target.url(),
                self.name,
                errors.len()
            )));
        }
        self.say(format!(
            "target {}: accepts the configuration",
            self.target.url()
        ));
        Ok(config)
    }

    fn transfer(&mut self, config: &Value) -> Result<(), MigrateError> {
        // 1. Stop on the source.
        let before = self
            .state(self.source)?
            .unwrap_or_else(|| "RUNNING".to_owned());
        let stop = self.path("/stop");
        expect(
            self.source,
            "PUT",
            &stop,
            self.source.put(&stop, None)?,
            &[202, 204],
        )?;
        self.done.stopped_from = Some(before);
        self.wait_stopped(self.source)?;
        self.say(format!(
            "source: {} STOPPED (its tasks committed their offsets)",
            self.name
        ));

        // 2. Its offsets.
        let offsets = self.offsets(self.source)?;
        self.done.source_offsets = Some(offsets.clone());
        self.say(format!(
            "source: {} offset partitions read{}",
            offsets.len(),
            sample(&offsets)
        ));

        // 3. Created STOPPED on the target.
        let create = json!({"name": self.name, "config": config, "initial_state": "STOPPED"});
        expect(
            self.target,
            "POST",
            "/connectors",
            self.target.post("/connectors", &create)?,
            &[201],
        )?;
        self.done.created_on_target = true;
        self.say(format!("target: {} created STOPPED", self.name));

        // 4. The target's offsets made the source's.
        let present = self.offsets(self.target)?;
        if present == offsets {
            self.say("target: already reads the same offsets (a shared offsets topic): verified");
        } else {
            let mut patch: Vec<Value> = offsets
                .iter()
                .map(|(p, o)| json!({"partition": parse(p), "offset": o}))
                .collect();
            patch.extend(
                present
                    .keys()
                    .filter(|p| !offsets.contains_key(*p))
                    .map(|p| json!({"partition": parse(p), "offset": null})),
            );
            if !patch.is_empty() {
                let path = self.path("/offsets");
                self.done.patched_target = true;
                expect(
                    self.target,
                    "PATCH",
                    &path,
                    self.target.patch(&path, &json!({"offsets": patch}))?,
                    &[200],
                )?;
            }
            // Kafka Connect answers the PATCH once the offsets are written, but its GET may read
            // them a moment later (seen in CI: `[]` right after the PATCH): read back until equal,
            // at most `--timeout`.
            let since = Instant::now();
            loop {
                let written = self.offsets(self.target)?;
                if written == offsets {
                    break;
                }
                if since.elapsed() > self.options.timeout {
                    return Err(MigrateError::Move(format!(
                        "the target's offsets read back differ from the source's after {:?}: {} vs {}",
                        self.options.timeout,
                        render(&written),
                        render(&offsets)
                    )));
                }
                std::thread::sleep(POLL);
            }
            self.say(format!(
                "target: offsets set to the source's ({} partitions), read back equal",
                offsets.len()
            ));
        }

        // 5. Resumed on the target.
        let resume = self.path("/resume");
        expect(
            self.target,
            "PUT",
            &resume,
            self.target.put(&resume, None)?,
            &[202, 204],
        )?;
        self.done.resumed_on_target = true;
        self.wait_running(self.target)?;
        self.say(format!("target: {} RUNNING", self.name));
        self.wait_first_commit(&offsets)?;

        // 6. Deleted on the source.
        if self.options.delete_source {
            let path = self.path("");
            expect(
                self.source,
                "DELETE",
                &path,
                self.source.delete(&path)?,
                &[204],
            )?;
            self.say(format!("source: {} deleted", self.name));
        } else {
            self.say(format!(
                "source: {} stays STOPPED there (delete it with --delete-source or DELETE {}{})",
                self.name,
                self.source.url(),
                self.path("")
            ));
        }
        self.say(format!("moved {} to {}", self.name, self.target.url()));
        Ok(())
    }

    /// Waits until the target commits offsets other than those it started from.
    fn wait_first_commit(&mut self, start: &Offsets) -> Result<(), MigrateError> {
        let since = Instant::now();
        while since.elapsed() < self.options.commit_timeout {
            if self.state(self.target)?.as_deref() == Some("FAILED") {
                return Err(MigrateError::Move(format!(
                    "the connector failed on the target: {}",
                    self.target.get(&self.path("/status"))?.body
                )));
            }
            if self.offsets(self.target)? != *start {
                self.say("target: first commit of new offsets seen");
                return Ok(());
            }
            std::thread::sleep(POLL);
        }
        self.say(format!(
            "target: no new offsets committed within {:?} (nothing new to read?); it runs from the source's offsets",
            self.options.commit_timeout
        ));
        Ok(())
    }

    /// Undoes what [`transfer`](Self::transfer) did, each step on its own; returns what happened.
    fn roll_back(&mut self) -> String {
        let mut report = Vec::new();
        let shared = !self.done.patched_target;
        if self.done.resumed_on_target {
            match self.stop_and_collect(self.target) {
                Ok(progress) if !shared && Some(&progress) != self.done.source_offsets.as_ref() => {
                    match self.set_offsets(self.source, &progress) {
                        Ok(()) => report.push(format!(
                            "the target's progress ({} partitions) written back to the source",
                            progress.len()
                        )),
                        Err(e) => report.push(format!(
                            "the target's progress could NOT be written back to the source ({e}): the source resumes from its own older offsets and repeats what the target delivered"
                        )),
                    }
                }
                Ok(_) => report.push("the target stopped".to_owned()),
                Err(e) => report.push(format!(
                    "the target could NOT be stopped ({e}): stop it there before the source runs"
                )),
            }
        }
        if self.done.created_on_target {
            if self.done.patched_target {
                let path = self.path("/offsets");
                match self.target.delete(&path) {
                    Ok(reply) if reply.status == 200 => {
                        report.push("the offsets written to the target reset".to_owned());
                    }
                    Ok(reply) => report.push(format!(
                        "the offsets written to the target could NOT be reset ({}: {})",
                        reply.status,
                        reply.message()
                    )),
                    Err(e) => report.push(format!(
                        "the offsets written to the target could NOT be reset ({e})"
                    )),
                }
            }
            let path = self.path("");
            match self.target.delete(&path) {
                Ok(reply) if matches!(reply.status, 204 | 404) => {
                    report.push("the target's copy deleted".to_owned());
                }
                Ok(reply) => report.push(format!(
                    "the target's copy could NOT be deleted ({}: {}): delete it there",
                    reply.status,
                    reply.message()
                )),
                Err(e) => report.push(format!(
                    "the target's copy could NOT be deleted ({e}): delete it there"
                )),
            }
        }
        if let Some(before) = self.done.stopped_from.clone() {
            let action = match before.as_str() {
                "PAUSED" => Some("/pause"),
                "STOPPED" => None,
                _ => Some("/resume"),
            };
            match action {
                None => report.push("the source left STOPPED, as it was".to_owned()),
                Some(action) => {
                    let path = self.path(action);
                    match self.source.put(&path, None) {
                        Ok(reply) if matches!(reply.status, 202 | 204) => {
                            report.push(format!(
                                "the source {}",
                                if action == "/pause" {
                                    "paused again"
                                } else {
                                    "resumed"
                                }
                            ));
                        }
                        Ok(reply) => report.push(format!(
                            "the source could NOT be restarted ({}: {}): PUT {}{path} there",
                            reply.status,
                            reply.message(),
                            self.source.url()
                        )),
                        Err(e) => report.push(format!(
                            "the source could NOT be restarted ({e}): PUT {}{path} there",
                            self.source.url()
                        )),
                    }
                }
            }
        }
        if report.is_empty() {
            report.push("nothing had changed".to_owned());
        }
        let report = report.join("; ");
        self.say(format!("rolled back: {report}"));
        report
    }

    /// Stops the connector on `end` and returns its offsets once STOPPED.
    fn stop_and_collect(&mut self, end: &Rest) -> Result<Offsets, MigrateError> {
        let path = self.path("/stop");
        expect(end, "PUT", &path, end.put(&path, None)?, &[202, 204])?;
        self.wait_stopped(end)?;
        self.offsets(end)
    }

    fn set_offsets(&self, end: &Rest, offsets: &Offsets) -> Result<(), MigrateError> {
        let path = self.path("/offsets");
        let body: Vec<Value> = offsets
            .iter()
            .map(|(p, o)| json!({"partition": parse(p), "offset": o}))
            .collect();
        expect(
            end,
            "PATCH",
            &path,
            end.patch(&path, &json!({"offsets": body}))?,
            &[200],
        )?;
        Ok(())
    }

    /// The connector's state on `end` (`None` without a status yet).
    fn state(&self, end: &Rest) -> Result<Option<String>, MigrateError> {
        let path = self.path("/status");
        let reply = end.get(&path)?;
        if reply.status == 404 {
            return Ok(None);
        }
        let reply = expect(end, "GET", &path, reply, &[200])?;
        Ok(reply.json()["connector"]["state"]
            .as_str()
            .map(str::to_owned))
    }

    fn wait_stopped(&mut self, end: &Rest) -> Result<(), MigrateError> {
        self.wait(end, "STOPPED with no task", |status| {
            Ok(status["connector"]["state"] == "STOPPED"
                && status["tasks"].as_array().is_none_or(Vec::is_empty))
        })
    }

    fn wait_running(&mut self, end: &Rest) -> Result<(), MigrateError> {
        let url = end.url().to_owned();
        self.wait(end, "RUNNING with every task running", |status| {
            let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
            if status["connector"]["state"] == "FAILED"
                || tasks.iter().any(|t| t["state"] == "FAILED")
            {
                return Err(MigrateError::Move(format!(
                    "the connector failed on {url}: {status}"
                )));
            }
            Ok(status["connector"]["state"] == "RUNNING"
                && !tasks.is_empty()
                && tasks.iter().all(|t| t["state"] == "RUNNING"))
        })
    }

    /// Polls the connector's status on `end` until `done` says so (or fails), at most `--timeout`.
    fn wait(
        &mut self,
        end: &Rest,
        what: &str,
        done: impl Fn(&Value) -> Result<bool, MigrateError>,
    ) -> Result<(), MigrateError> {
        let since = Instant::now();
        loop {
            let status = end.get(&self.path("/status"))?.json();
            if done(&status)? {
                return Ok(());
            }
            if since.elapsed() > self.options.timeout {
                return Err(MigrateError::Timeout(
                    self.options.timeout,
                    format!(
                        "{} to be {what} on {} (last status {status})",
                        self.name,
                        end.url()
                    ),
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The connector's committed offsets on `end` (KIP-875).
    fn offsets(&self, end: &Rest) -> Result<Offsets, MigrateError> {
        let path = self.path("/offsets");
        let reply = expect(end, "GET", &path, end.get(&path)?, &[200])?;
        let body = reply.json();
        let Some(entries) = body["offsets"].as_array() else {
            return Err(MigrateError::Move(format!(
                "GET {}{path} did not answer {{\"offsets\":[…]}}: {}",
                end.url(),
                reply.body
            )));
        };
        Ok(entries
            .iter()
            .map(|e| (e["partition"].to_string(), e["offset"].clone()))
            .collect())
    }
}

/// `reply` if its status is one of `ok`, else the error naming the request.
fn expect(
    end: &Rest,
    method: &str,
    path: &str,
    reply: Reply,
    ok: &[u16],
) -> Result<Reply, MigrateError> {
    if ok.contains(&reply.status) {
        Ok(reply)
    } else {
        Err(MigrateError::Refused {
            request: format!("{method} {}{path}", end.url()),
            status: reply.status,
            message: reply.message(),
        })
    }
}

/// Every error of a validation answer (`configs[].value.errors`), as `key: message`.
fn validation_errors(infos: &Value) -> Vec<String> {
    infos["configs"]
        .as_array()
        .map(|configs| {
            configs
                .iter()
                .flat_map(|c| {
                    let key = c["value"]["name"].as_str().unwrap_or("?").to_owned();
                    c["value"]["errors"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                        .into_iter()
                        .map(move |e| format!("{key}: {}", e.as_str().unwrap_or_default()))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn parse(partition: &str) -> Value {
    serde_json::from_str(partition).unwrap_or(Value::Null)
}

/// The first few partitions and offsets, for the log of a move.
fn sample(offsets: &Offsets) -> String {
    const SHOWN: usize = 5;
    let mut shown: Vec<String> = offsets
        .iter()
        .take(SHOWN)
        .map(|(p, o)| format!("\n    {p} → {o}"))
        .collect();
    if offsets.len() > SHOWN {
        shown.push(format!("\n    … and {} more", offsets.len() - SHOWN));
    }
    shown.concat()
}

fn render(offsets: &Offsets) -> String {
    let entries: Vec<String> = offsets.iter().map(|(p, o)| format!("{p} → {o}")).collect();
    format!("[{}]", entries.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_errors_name_their_keys() {
        let infos = json!({"error_count": 2, "configs": [
            {"value": {"name": "file", "errors": []}},
            {"value": {"name": "transforms.x.type", "errors": ["Class io.debezium.X could not be found."]}},
            {"value": {"name": "topic", "errors": ["Missing required configuration \"topic\""]}}
        ]});
        assert_eq!(
            validation_errors(&infos),
            [
                "transforms.x.type: Class io.debezium.X could not be found.",
                "topic: Missing required configuration \"topic\""
            ]
        );
    }
}
