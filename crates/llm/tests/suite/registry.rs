use std::path::Path;

use trellis_config::{Config, LoadOptions};
use trellis_llm::{Error, ModelRegistry, ProviderKind};
use trellis_test_support::TempWorkspace;

#[test]
fn no_configuration_means_the_embedded_default_for_every_role() {
    let reg = ModelRegistry::from_config(&Config::default()).unwrap();
    assert_eq!(reg.default_profile(), "local");
    for role in ["orchestrator", "coder", "retrieval", "anything"] {
        assert_eq!(reg.profile_for_role(role), "local");
    }
    let local = reg
        .summaries()
        .into_iter()
        .find(|p| p.name == "local")
        .unwrap();
    assert_eq!(local.provider, ProviderKind::Embedded);
    assert_eq!(local.model, "qwen2.5-coder-1.5b-instruct");
    assert!(local.default && local.builtin);
    assert_eq!(local.roles.len(), 9);
    assert!(local.roles.iter().any(|r| r == "discussion"));
}

#[test]
fn roles_profiles_and_project_overrides() {
    let ws = TempWorkspace::new("llm-reg").unwrap();
    let user = ws.path().join("user.toml");
    std::fs::write(
        &user,
        r#"
[models.profiles.ollama]
provider = "openai"
base_url = "http://localhost:11434/v1"
model = "qwen3:8b"

[roles]
coder = "ollama"
"#,
    )
    .unwrap();
    std::fs::create_dir_all(ws.path().join(".trellis")).unwrap();
    std::fs::write(
        ws.path().join(".trellis/config.toml"),
        "[roles]\nplanner = \"ollama\"\ndefault = \"tiny\"\n[models.profiles.local]\nthreads = 2\n",
    )
    .unwrap();
    let mut options = LoadOptions::discover(ws.path(), vec!["roles.reviewer=ollama".into()]);
    options.user_file = Some(user);
    let config = Config::load(&options).unwrap();
    let reg = ModelRegistry::from_config(&config).unwrap();
    assert_eq!(reg.profile_for_role("coder"), "ollama");
    assert_eq!(reg.profile_for_role("planner"), "ollama");
    assert_eq!(reg.profile_for_role("reviewer"), "ollama");
    assert_eq!(reg.profile_for_role("tester"), "tiny");
    // A partial override of a built-in profile keeps its other fields.
    let local = reg.profile("local").unwrap();
    assert_eq!(local.threads, Some(2));
    assert_eq!(local.model.as_deref(), Some("qwen2.5-coder-1.5b-instruct"));
    assert_eq!(local.context, Some(16_384));
    let p = reg.provider("ollama").unwrap();
    assert_eq!(p.info().model, "qwen3:8b");
}

#[test]
fn unknown_profile_references_name_the_key_and_the_nearest_profile() {
    let config = Config::from_toml(
        Path::new("project.toml"),
        "[models.profiles.fast]\nprovider = \"openai\"\nmodel = \"m\"\n\n[roles]\ncoder = \"fsat\"\n",
    )
    .unwrap();
    let err = ModelRegistry::from_config(&config).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("project.toml:6:"), "{msg}");
    assert!(msg.contains("roles.coder"), "{msg}");
    assert!(msg.contains("did you mean `fast`"), "{msg}");
}

#[test]
fn unknown_profile_keys_are_rejected() {
    let config = Config::from_toml(
        Path::new("c.toml"),
        "[models.profiles.fast]\nprovider = \"openai\"\nmodel = \"m\"\napi_key = \"sk-...\"\n",
    )
    .unwrap();
    let err = ModelRegistry::from_config(&config).unwrap_err();
    assert!(matches!(err, Error::ConfigFile(_)), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("c.toml:4"), "{msg}");
    assert!(
        msg.contains("did you mean `models.profiles.fast.api_key_env`"),
        "{msg}"
    );
}

#[test]
fn remote_profiles_need_a_model_and_a_provider() {
    let config = Config::from_toml(
        Path::new("c.toml"),
        "[models.profiles.x]\nprovider = \"anthropic\"\n",
    )
    .unwrap();
    let err = ModelRegistry::from_config(&config).unwrap_err();
    assert!(err.to_string().contains("set `model`"), "{err}");
    let config =
        Config::from_toml(Path::new("c.toml"), "[models.profiles.x]\nmodel = \"m\"\n").unwrap();
    let err = ModelRegistry::from_config(&config).unwrap_err();
    assert!(err.to_string().contains("set `provider`"), "{err}");
}

#[cfg(feature = "embedded")]
#[tokio::test]
async fn budgets_from_configuration_guard_a_role() {
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;
    use trellis_llm::{BudgetLedger, CallScope, ChatRequest, Message};

    let config = Config::from_toml(
        Path::new("c.toml"),
        "[roles]\ncoder = \"tiny\"\n[budgets.agents.coder]\ntokens = 100\n",
    )
    .unwrap();
    let reg = ModelRegistry::from_config(&config).unwrap();
    assert_eq!(reg.budget().agents["coder"].tokens, Some(100));
    let ledger = Arc::new(BudgetLedger::new(reg.budget().clone()));
    let scope = CallScope {
        stage: None,
        agent: Some("coder".into()),
    };
    let p = reg.budgeted("coder", ledger, scope).unwrap();
    // No max_tokens: the projection uses the embedded default (512) > 100 — refused.
    let err = p
        .complete(
            ChatRequest::new(vec![Message::user("hi")]),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Budget(_)), "{err}");
}
