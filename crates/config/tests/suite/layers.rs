use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use trellis_config::{Config, Error, LoadOptions, Origin};
use trellis_test_support::TempWorkspace;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
struct Models {
    default: Option<String>,
    profiles: BTreeMap<String, Profile>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
struct Profile {
    kind: Option<String>,
    model: Option<String>,
    max_tokens: Option<u32>,
    headers: BTreeMap<String, String>,
}

fn write(ws: &TempWorkspace, name: &str, text: &str) -> std::path::PathBuf {
    let p = ws.path().join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn project_overrides_user_and_c_overrides_both() {
    let ws = TempWorkspace::new("cfg").unwrap();
    let user = write(
        &ws,
        "user.toml",
        "[models]\ndefault = \"a\"\n[models.profiles.a]\nkind = \"openai\"\nmodel = \"m1\"\nmax_tokens = 10\n",
    );
    let project = write(&ws, "project.toml", "[models.profiles.a]\nmodel = \"m2\"\n");
    let cfg = Config::load(&LoadOptions {
        user_file: Some(user.clone()),
        project_file: Some(project.clone()),
        overrides: vec![
            "models.profiles.a.max_tokens=99".into(),
            "models.default=b".into(),
        ],
    })
    .unwrap();
    let m: Models = cfg.section("models").unwrap();
    let a = &m.profiles["a"];
    assert_eq!(a.kind.as_deref(), Some("openai"));
    assert_eq!(a.model.as_deref(), Some("m2"));
    assert_eq!(a.max_tokens, Some(99));
    assert_eq!(m.default.as_deref(), Some("b"));
    assert_eq!(
        cfg.origin("models.profiles.a.model"),
        Some(&Origin::File {
            path: project,
            line: 2
        })
    );
    assert_eq!(
        cfg.origin("models.profiles.a.kind"),
        Some(&Origin::File {
            path: user,
            line: 4
        })
    );
    assert!(matches!(
        cfg.origin("models.default"),
        Some(Origin::Override(_))
    ));
}

#[test]
fn missing_files_are_skipped_and_sections_default() {
    let ws = TempWorkspace::new("cfg").unwrap();
    let cfg = Config::load(&LoadOptions {
        user_file: Some(ws.path().join("nope.toml")),
        project_file: None,
        overrides: vec![],
    })
    .unwrap();
    let m: Models = cfg.section("models").unwrap();
    assert!(m.profiles.is_empty());
    assert!(cfg.files().is_empty());
}

#[test]
fn unknown_nested_key_names_file_line_and_nearest_key() {
    let ws = TempWorkspace::new("cfg").unwrap();
    let p = write(
        &ws,
        "c.toml",
        "[models.profiles.fast]\nkind = \"openai\"\n\nmodle = \"x\"\n",
    );
    let cfg = Config::load(&LoadOptions {
        user_file: None,
        project_file: Some(p.clone()),
        overrides: vec![],
    })
    .unwrap();
    let err = cfg.section::<Models>("models").unwrap_err();
    match &err {
        Error::UnknownKey {
            key,
            origin,
            suggestion,
        } => {
            assert_eq!(key, "models.profiles.fast.modle");
            assert_eq!(origin, &format!("{}:4", p.display()));
            assert_eq!(suggestion.as_deref(), Some("models.profiles.fast.model"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("did you mean `models.profiles.fast.model`")
    );
    // A free-form map (headers) accepts any key.
    let ok = Config::from_toml(&p, "[models.profiles.x.headers]\nX-Anything = \"1\"\n").unwrap();
    assert_eq!(
        ok.section::<Models>("models").unwrap().profiles["x"].headers["X-Anything"],
        "1"
    );
}

#[test]
fn unknown_section_is_rejected_but_future_sections_are_not() {
    let ws = TempWorkspace::new("cfg").unwrap();
    let p = write(&ws, "c.toml", "[modles]\ndefault = \"x\"\n");
    let err = Config::from_toml(&p, &std::fs::read_to_string(&p).unwrap()).unwrap_err();
    assert!(
        matches!(&err, Error::UnknownKey { key, suggestion: Some(s), .. } if key == "modles" && s == "models"),
        "{err}"
    );
    let ok = Config::from_toml(&p, "[tools]\nanything = 1\n[index]\nx = true\n");
    assert!(ok.is_ok());
}

#[test]
fn type_errors_name_the_key_and_origin() {
    let ws = TempWorkspace::new("cfg").unwrap();
    let p = write(
        &ws,
        "c.toml",
        "[models.profiles.a]\nmax_tokens = \"lots\"\n",
    );
    let cfg = Config::from_toml(&p, &std::fs::read_to_string(&p).unwrap()).unwrap();
    let err = cfg.section::<Models>("models").unwrap_err();
    match &err {
        Error::Invalid { key, origin, .. } => {
            assert_eq!(key, "models.profiles.a.max_tokens");
            assert_eq!(origin, &format!("{}:2", p.display()));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn parse_errors_have_line_and_column() {
    let p = std::path::Path::new("bad.toml");
    let err = Config::from_toml(p, "[models]\ndefault = \n").unwrap_err();
    assert!(err.to_string().starts_with("bad.toml:2:"), "{err}");
}

#[test]
fn override_syntax() {
    let cfg = Config::load(&LoadOptions {
        overrides: vec![
            "budgets.run.tokens = 5000".into(),
            "budgets.note=plain words".into(),
            "budgets.list=[1, 2]".into(),
        ],
        ..LoadOptions::default()
    })
    .unwrap();
    let b = cfg.raw_section("budgets").unwrap();
    assert_eq!(b["run"]["tokens"].as_integer(), Some(5000));
    assert_eq!(b["note"].as_str(), Some("plain words"));
    assert_eq!(b["list"].as_array().map(Vec::len), Some(2));
    let bad = Config::load(&LoadOptions {
        overrides: vec!["novalue".into()],
        ..LoadOptions::default()
    });
    assert!(matches!(bad, Err(Error::Override { .. })));
    let bad = Config::load(&LoadOptions {
        overrides: vec!["a..b=1".into()],
        ..LoadOptions::default()
    });
    assert!(matches!(bad, Err(Error::Override { .. })));
}

#[test]
fn sections_without_a_schema_still_name_the_nearest_key() {
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Tools {
        #[serde(default)]
        shell_timeout_secs: Option<u64>,
        #[serde(default)]
        allow_network: Option<bool>,
    }
    let p = std::path::Path::new("tools.toml");
    let cfg = Config::from_toml(p, "[tools]\nallow_network = true\nshell_timeout = 5\n").unwrap();
    let err = cfg.section_serde::<Tools>("tools").unwrap_err();
    match &err {
        Error::UnknownKey {
            key,
            origin,
            suggestion,
        } => {
            assert_eq!(key, "tools.shell_timeout");
            assert_eq!(origin, "tools.toml:3");
            assert_eq!(suggestion.as_deref(), Some("tools.shell_timeout_secs"));
        }
        other => panic!("unexpected {other:?}"),
    }
    let ok = Config::from_toml(p, "[tools]\nallow_network = true\n").unwrap();
    assert_eq!(
        ok.section_serde::<Tools>("tools").unwrap().allow_network,
        Some(true)
    );
}

#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Hook {
    event: String,
    command: String,
}

#[test]
fn list_sections_add_up_across_layers_and_a_bad_entry_names_its_file_and_line() {
    let ws = TempWorkspace::new("cfg-list").unwrap();
    let user = write(
        &ws,
        "user.toml",
        "[[hooks]]\nevent = \"run_end\"\ncommand = \"notify-send done\"\n",
    );
    let project = write(
        &ws,
        "project.toml",
        "[[hooks]]\nevent = \"before_tool\"\ncommand = \"a\"\n\n[[hooks]]\nevent = \"after_tool\"\ncomand = \"b\"\n",
    );
    let cfg = Config::load(&LoadOptions {
        user_file: Some(user.clone()),
        project_file: Some(project.clone()),
        overrides: vec![],
    })
    .unwrap();
    match cfg.list::<Hook>("hooks") {
        Err(Error::UnknownKey {
            key,
            origin,
            suggestion,
        }) => {
            // The project's second entry is the merged list's third.
            assert_eq!(key, "hooks[2].comand");
            assert_eq!(origin, format!("{}:7", project.display()));
            assert_eq!(suggestion.as_deref(), Some("hooks[2].command"));
        }
        other => panic!("{other:?}"),
    }
    std::fs::write(
        &project,
        "[[hooks]]\nevent = \"before_tool\"\ncommand = \"a\"\n",
    )
    .unwrap();
    let cfg = Config::load(&LoadOptions {
        user_file: Some(user),
        project_file: Some(project),
        overrides: vec![],
    })
    .unwrap();
    let hooks: Vec<Hook> = cfg.list("hooks").unwrap();
    assert_eq!(
        hooks.iter().map(|h| h.command.as_str()).collect::<Vec<_>>(),
        ["notify-send done", "a"]
    );
    // A table where a list belongs says how to write it.
    let err = Config::from_toml(std::path::Path::new("c.toml"), "[hooks]\nevent = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("[[hooks]]"), "{err}");
}
