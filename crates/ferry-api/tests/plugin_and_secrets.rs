//! The connector factory and the declared secrecy of configuration keys.

use ferry_api::{
    Config, ConfigIssue, ConfigKey, ConnectError, ConnectorPlugin, HIDDEN, Redactor, Secrecy,
    SourceConnector, SourceTask,
};

struct Versioned(&'static str);

impl SourceConnector for Versioned {
    fn version(&self) -> String {
        self.0.to_owned()
    }
    fn config_keys(&self) -> Vec<ConfigKey> {
        Vec::new()
    }
    fn validate(&self, _: &Config) -> Vec<ConfigIssue> {
        Vec::new()
    }
    fn task_configs(&self, _: &Config, _: usize) -> Result<Vec<Config>, ConnectError> {
        Ok(Vec::new())
    }
    fn create_task(&self) -> Box<dyn SourceTask> {
        unreachable!("these tests start no task")
    }
}

#[test]
fn a_plugin_lists_its_java_class_name_and_answers_to_every_name_exactly() {
    let plugin = ConnectorPlugin::new(["Short", "org.example.LongName"], || {
        Box::new(Versioned("1.2")) as Box<dyn SourceConnector>
    });
    assert_eq!(plugin.class(), "org.example.LongName");
    assert_eq!(
        plugin.names().collect::<Vec<_>>(),
        ["Short", "org.example.LongName"]
    );
    assert!(plugin.answers_to("Short"));
    assert!(plugin.answers_to("org.example.LongName"));
    assert!(!plugin.answers_to("short"));
    assert!(!plugin.answers_to("LongName"));
    assert_eq!(plugin.make().version(), "1.2");

    let plain = ConnectorPlugin::new([String::from("Only")], || {
        Box::new(Versioned("1")) as Box<dyn SourceConnector>
    });
    assert_eq!(plain.class(), "Only");
}

fn strip_password(url: &str) -> String {
    url.replace(":pw@", ":***@")
}

#[test]
fn secret_keys_are_hidden_and_embedded_secrets_redacted() {
    let public = ConfigKey::optional("topic", None, "the topic");
    assert_eq!(public.secrecy(), Secrecy::Public);
    assert_eq!(public.shown("events"), "events");

    let secret = ConfigKey::required("connection.password", "the password").secret();
    assert_eq!(secret.secrecy(), Secrecy::Secret);
    assert_eq!(secret.shown("pw"), HIDDEN);
    assert!(secret.required, "builders keep what the constructor set");

    let redactor = Redactor {
        name: "url",
        redact: strip_password,
    };
    let url = ConfigKey::optional("connection.url", None, "the URL").embeds_secret(redactor);
    assert_eq!(url.secrecy(), Secrecy::Embedded(redactor));
    assert_eq!(url.shown("postgres://u:pw@h/db"), "postgres://u:***@h/db");
    assert!(!format!("{url:?}").contains("strip_password"));
}
