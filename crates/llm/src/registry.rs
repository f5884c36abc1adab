//! Profiles resolved from configuration into providers, and roles into profiles.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use trellis_config::Config;

use crate::anthropic::AnthropicProvider;
use crate::budget::{Budget, BudgetLedger, Budgeted, CallScope, Price};
use crate::config::{
    BudgetsSection, ModelsSection, ProfileConfig, ProviderName, ROLES, RolesSection,
};
use crate::download::{
    QWEN_CODER_1_5B, SMOLLM2_135M, TINYCODER, builtin, builtin_models, model_cache_dir,
};
use crate::http::Endpoint;
use crate::ollama::OllamaProvider;
use crate::openai::OpenAiProvider;
use crate::provider::{ModelProvider, ProviderInfo, ProviderKind};
use crate::retry::{RetryPolicy, Retrying};
use crate::structured::StructuredMode;
use crate::{Error, Result};

/// The profile used when nothing is configured.
pub const DEFAULT_PROFILE: &str = "local";

/// Default `max_tokens` of remote profiles (Anthropic requires one).
const REMOTE_MAX_TOKENS: u32 = 4096;

/// Default `max_tokens` of embedded profiles.
const EMBEDDED_MAX_TOKENS: u32 = 512;

/// The `local` profile's context window: room for a stage's retrieval pack, the
/// conversation of a few tool rounds and a file-sized answer (the model was trained on
/// 32k; every 1k tokens of window costs 28 KB of KV cache per token slot and prompt time).
const LOCAL_CONTEXT: u32 = 16_384;

/// The `local` profile's default answer length: a whole edited function or a report.
const LOCAL_MAX_TOKENS: u32 = 1024;

fn builtin_profiles() -> BTreeMap<String, ProfileConfig> {
    let mut m = BTreeMap::new();
    m.insert(
        "local".to_string(),
        ProfileConfig {
            provider: Some(ProviderName::Embedded),
            model: Some(QWEN_CODER_1_5B.to_string()),
            context: Some(LOCAL_CONTEXT),
            max_tokens: Some(LOCAL_MAX_TOKENS),
            description: Some(
                "built-in: Qwen2.5-Coder-1.5B-Instruct Q4_K_M in-process (llama.cpp), fetched on \
                 first use (1.1 GB)"
                    .into(),
            ),
            ..ProfileConfig::default()
        },
    );
    m.insert(
        "small".to_string(),
        ProfileConfig {
            provider: Some(ProviderName::Embedded),
            model: Some(SMOLLM2_135M.name.to_string()),
            description: Some(
                "built-in: SmolLM2-135M-Instruct in-process (98 MB): fast, proves wiring, \
                 cannot code"
                    .into(),
            ),
            ..ProfileConfig::default()
        },
    );
    m.insert(
        "tiny".to_string(),
        ProfileConfig {
            provider: Some(ProviderName::Embedded),
            model: Some(TINYCODER.name.to_string()),
            description: Some(
                "built-in test fixture: 2.8 MB random weights (output is noise)".into(),
            ),
            ..ProfileConfig::default()
        },
    );
    m
}

/// A profile after defaults were applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileSummary {
    /// Name.
    pub name: String,
    /// Provider.
    pub provider: ProviderKind,
    /// Model identifier or file.
    pub model: String,
    /// Base URL or GGUF path.
    pub location: String,
    /// Whether the profile is built in (possibly with configured overrides).
    pub builtin: bool,
    /// Roles that resolve to this profile.
    pub roles: Vec<String>,
    /// Whether this is `models.default`.
    pub default: bool,
    /// The configured `context` (a remote endpoint's window is otherwise asked of its
    /// server on first use).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<u32>,
    /// For built-in weights: whether they are already cached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached: Option<bool>,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Profiles, roles and the providers built from them (created on first use and shared).
pub struct ModelRegistry {
    profiles: BTreeMap<String, ProfileConfig>,
    roles: RolesSection,
    default: String,
    cache_dir: PathBuf,
    budget: Budget,
    providers: Mutex<BTreeMap<String, Arc<dyn ModelProvider>>>,
}

impl std::fmt::Debug for ModelRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRegistry")
            .field("profiles", &self.profiles.keys().collect::<Vec<_>>())
            .field("default", &self.default)
            .finish_non_exhaustive()
    }
}

impl ModelRegistry {
    /// Reads `[models]`, `[roles]` and `[budgets]` and checks every reference.
    pub fn from_config(config: &Config) -> Result<Self> {
        let models: ModelsSection = config.section("models")?;
        let roles: RolesSection = config.section("roles")?;
        let budgets: BudgetsSection = config.section("budgets")?;
        let mut profiles = builtin_profiles();
        for (name, p) in models.profiles {
            let merged = match profiles.get(&name) {
                Some(base) => p.over(base),
                None => p,
            };
            profiles.insert(name, merged);
        }
        let default = models
            .default
            .unwrap_or_else(|| DEFAULT_PROFILE.to_string());
        let registry = Self {
            profiles,
            roles,
            default,
            cache_dir: models.cache_dir.unwrap_or_else(model_cache_dir),
            budget: budgets.into(),
            providers: Mutex::new(BTreeMap::new()),
        };
        registry.validate(config)?;
        Ok(registry)
    }

    fn unknown_profile(&self, config: &Config, key: &str, name: &str) -> Error {
        let origin = config
            .origin(key)
            .map_or_else(|| "configuration".to_string(), ToString::to_string);
        let hint = trellis_config::nearest(name, self.profiles.keys().map(String::as_str))
            .map(|s| format!(" (did you mean `{s}`?)"))
            .unwrap_or_default();
        let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
        Error::Config(format!(
            "{origin}: `{key}` names unknown profile `{name}`{hint}; profiles: {}",
            known.join(", ")
        ))
    }

    fn validate(&self, config: &Config) -> Result<()> {
        if !self.profiles.contains_key(&self.default) {
            return Err(self.unknown_profile(config, "models.default", &self.default));
        }
        for role in ROLES {
            if let Some(p) = self.roles.get(role)
                && !self.profiles.contains_key(p)
            {
                return Err(self.unknown_profile(config, &format!("roles.{role}"), p));
            }
        }
        for (name, p) in &self.profiles {
            let key = format!("models.profiles.{name}");
            let origin = config
                .origin(&key)
                .map_or_else(|| "configuration".to_string(), ToString::to_string);
            let fail = |msg: &str| Err(Error::Config(format!("{origin}: `{key}`: {msg}")));
            match p.provider {
                None => {
                    return fail("set `provider` to `embedded`, `openai`, `anthropic` or `ollama`");
                }
                Some(ProviderName::Embedded) => {
                    if p.path.is_none() && p.model.as_deref().and_then(builtin).is_none() {
                        let models = builtin_models();
                        let names: Vec<&str> = models.iter().map(|m| m.name()).collect();
                        return fail(&format!(
                            "set `path` to a GGUF file or `model` to a built-in model ({})",
                            names.join(", ")
                        ));
                    }
                }
                Some(ProviderName::Openai | ProviderName::Anthropic | ProviderName::Ollama) => {
                    if p.model.is_none() {
                        return fail("set `model` to the endpoint's model identifier");
                    }
                }
            }
        }
        Ok(())
    }

    /// The budgets from `[budgets]`.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// The default profile's name.
    pub fn default_profile(&self) -> &str {
        &self.default
    }

    /// The profile a role resolves to: `roles.<role>`, else `roles.default`, else
    /// `models.default`.
    pub fn profile_for_role(&self, role: &str) -> &str {
        self.roles
            .get(role)
            .or(self.roles.default.as_deref())
            .unwrap_or(&self.default)
    }

    /// A profile's configuration (after built-in defaults).
    pub fn profile(&self, name: &str) -> Option<&ProfileConfig> {
        self.profiles.get(name)
    }

    /// The price configured for a profile.
    pub fn price(&self, name: &str) -> Option<Price> {
        self.profiles.get(name).and_then(|p| p.price)
    }

    /// Every profile, for listings.
    pub fn summaries(&self) -> Vec<ProfileSummary> {
        let builtins = builtin_profiles();
        self.profiles
            .iter()
            .map(|(name, p)| {
                let provider = match p.provider {
                    Some(ProviderName::Openai) => ProviderKind::Openai,
                    Some(ProviderName::Anthropic) => ProviderKind::Anthropic,
                    Some(ProviderName::Ollama) => ProviderKind::Ollama,
                    Some(ProviderName::Embedded) | None => ProviderKind::Embedded,
                };
                let builtin_model = p
                    .path
                    .is_none()
                    .then(|| p.model.as_deref().and_then(builtin))
                    .flatten();
                let location = match provider {
                    ProviderKind::Embedded => match (&p.path, &builtin_model) {
                        (Some(path), _) => path.display().to_string(),
                        (None, Some(m)) => m.path_in(&self.cache_dir).display().to_string(),
                        (None, None) => String::new(),
                    },
                    _ => base_url(p, provider),
                };
                ProfileSummary {
                    name: name.clone(),
                    provider,
                    model: p.model.clone().unwrap_or_default(),
                    location,
                    builtin: builtins.contains_key(name),
                    roles: ROLES
                        .iter()
                        .filter(|r| self.profile_for_role(r) == name)
                        .map(|r| (*r).to_string())
                        .collect(),
                    default: *name == self.default,
                    context: p.context,
                    cached: builtin_model.as_ref().map(|m| m.is_cached(&self.cache_dir)),
                    description: p.description.clone(),
                }
            })
            .collect()
    }

    /// The provider for a role.
    pub fn for_role(&self, role: &str) -> Result<Arc<dyn ModelProvider>> {
        self.provider(self.profile_for_role(role))
    }

    /// The provider for a role, with every call checked against and booked to `ledger` under
    /// `scope` (using the profile's price and its default `max_tokens` as the projection of
    /// requests that set none).
    pub fn budgeted(
        &self,
        role: &str,
        ledger: Arc<BudgetLedger>,
        scope: CallScope,
    ) -> Result<Arc<dyn ModelProvider>> {
        let name = self.profile_for_role(role);
        let inner = self.provider(name)?;
        let profile = self.profiles.get(name);
        let default_max =
            profile
                .and_then(|p| p.max_tokens)
                .unwrap_or(match profile.and_then(|p| p.provider) {
                    Some(ProviderName::Embedded) | None => EMBEDDED_MAX_TOKENS,
                    _ => REMOTE_MAX_TOKENS,
                });
        Ok(Arc::new(Budgeted::new(
            inner,
            ledger,
            scope,
            self.price(name),
            default_max,
        )))
    }

    /// Uses `provider` for profile `name` instead of building one from its configuration
    /// (for tests with a scripted provider, and for programs embedding Trellis).
    pub fn install(&self, name: &str, provider: Arc<dyn ModelProvider>) {
        self.providers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name.to_string(), provider);
    }

    /// The provider of a profile (built once, then shared).
    pub fn provider(&self, name: &str) -> Result<Arc<dyn ModelProvider>> {
        let mut cache = self
            .providers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = cache.get(name) {
            return Ok(Arc::clone(p));
        }
        let profile = self.profiles.get(name).ok_or_else(|| {
            let hint = trellis_config::nearest(name, self.profiles.keys().map(String::as_str))
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            Error::Config(format!("unknown model profile `{name}`{hint}"))
        })?;
        let provider = build(name, profile, &self.cache_dir)?;
        cache.insert(name.to_string(), Arc::clone(&provider));
        Ok(provider)
    }
}

fn base_url(p: &ProfileConfig, kind: ProviderKind) -> String {
    p.base_url.clone().unwrap_or_else(|| match kind {
        ProviderKind::Anthropic => "https://api.anthropic.com/v1".into(),
        ProviderKind::Ollama => "http://localhost:11434".into(),
        _ => "https://api.openai.com/v1".into(),
    })
}

fn build(
    name: &str,
    p: &ProfileConfig,
    cache_dir: &std::path::Path,
) -> Result<Arc<dyn ModelProvider>> {
    let kind = match p.provider {
        Some(ProviderName::Embedded) | None => return build_embedded(name, p, cache_dir),
        Some(ProviderName::Openai) => ProviderKind::Openai,
        Some(ProviderName::Anthropic) => ProviderKind::Anthropic,
        Some(ProviderName::Ollama) => ProviderKind::Ollama,
    };
    let model = p.model.clone().unwrap_or_default();
    // Real OpenAI and Anthropic need a key; local servers (Ollama among them) usually do not.
    let api_key_env = p.api_key_env.clone().or_else(|| match (kind, &p.base_url) {
        (ProviderKind::Openai, None) => Some("OPENAI_API_KEY".into()),
        (ProviderKind::Anthropic, None) => Some("ANTHROPIC_API_KEY".into()),
        _ => None,
    });
    let timeout = Duration::from_secs(p.timeout_secs.unwrap_or(120));
    let endpoint = Endpoint {
        profile: name.to_string(),
        client: crate::http::client(Duration::from_secs(10), Some(timeout))?,
        base_url: base_url(p, kind),
        api_key_env,
        headers: crate::http::header_map(name, p.headers.clone())?,
    };
    let structured = p.structured_output.unwrap_or_default();
    let info = ProviderInfo {
        profile: name.to_string(),
        kind,
        model,
        native_structured_output: matches!(
            structured,
            StructuredMode::Native | StructuredMode::Tool
        ),
        context_window: p.context,
    };
    let inner: Arc<dyn ModelProvider> = match kind {
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(
            info,
            endpoint,
            structured,
            p.max_tokens.unwrap_or(REMOTE_MAX_TOKENS),
            p.temperature,
        )),
        ProviderKind::Ollama => Arc::new(OllamaProvider::new(
            info,
            endpoint,
            structured,
            p.max_tokens,
            p.temperature,
        )),
        _ => Arc::new(OpenAiProvider::new(
            info,
            endpoint,
            structured,
            p.max_tokens,
            p.temperature,
        )),
    };
    let policy = RetryPolicy {
        max_retries: p.max_retries.unwrap_or(RetryPolicy::default().max_retries),
        ..RetryPolicy::default()
    };
    Ok(Arc::new(Retrying::new(inner, policy)))
}

#[cfg(feature = "embedded")]
fn build_embedded(
    name: &str,
    p: &ProfileConfig,
    cache_dir: &std::path::Path,
) -> Result<Arc<dyn ModelProvider>> {
    use crate::embedded::{EmbeddedProvider, EmbeddedSettings, ModelSource};
    let source = match (&p.path, p.model.as_deref()) {
        (Some(path), _) => ModelSource::Path(path.clone()),
        (None, model) => {
            let m = model
                .and_then(builtin)
                .ok_or_else(|| Error::Config(format!("profile `{name}`: no model file")))?;
            ModelSource::Builtin {
                model: m,
                cache_dir: cache_dir.to_path_buf(),
            }
        }
    };
    let d = EmbeddedSettings::default();
    let settings = EmbeddedSettings {
        context: p.context.unwrap_or(d.context),
        threads: p.threads.unwrap_or(d.threads),
        max_tokens: p.max_tokens.unwrap_or(d.max_tokens),
        temperature: p.temperature.unwrap_or(d.temperature),
        seed: p.seed.unwrap_or(d.seed),
        ignore_eos: false,
        tool_format: p.tool_format.unwrap_or(d.tool_format),
    };
    Ok(Arc::new(EmbeddedProvider::new(name, source, settings)))
}

#[cfg(not(feature = "embedded"))]
fn build_embedded(
    name: &str,
    _p: &ProfileConfig,
    _cache_dir: &std::path::Path,
) -> Result<Arc<dyn ModelProvider>> {
    Err(Error::Unsupported {
        provider: name.to_string(),
        message: "this build of Trellis has no embedded model runtime (cargo feature `embedded`)"
            .into(),
    })
}
