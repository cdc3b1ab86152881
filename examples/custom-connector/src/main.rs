//! `custom-connector`: the `ferry` command line with one more connector, `CounterSource`.

use std::process::ExitCode;

use custom_connector::CounterSource;
use ferry_api::ConnectorPlugin;

fn main() -> ExitCode {
    ferry::Ferry::builder()
        .connector(ConnectorPlugin::new(
            ["CounterSource", "com.example.CounterSource"],
            || Box::new(CounterSource),
        ))
        .run_cli()
}
