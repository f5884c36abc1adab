//! The code context a stage pack gets besides its search results: the code maps of code
//! workflows and, for document workflows, the outline of the code files the pack's sections
//! name; both read through the workspace index's pool.

use super::*;

impl RetrievalAgent {
    /// Whether packs get the code maps: code workflows, unless `map_share` is 0.
    pub(super) fn maps_on(&self, strategy: &RetrievalStrategyConfig) -> bool {
        strategy.ast_enabled() && self.options.map_share > 0.0
    }

    /// Tokens of a stage's budget kept for the code maps (none unless AST work is on).
    pub(super) fn map_reserve(&self, strategy: &RetrievalStrategyConfig, budget: usize) -> usize {
        if self.maps_on(strategy) {
            (budget as f32 * self.options.map_share.min(1.0)) as usize
        } else {
            0
        }
    }

    /// Code workflows: adds the AST context map of each pack's files and the repo map,
    /// within what the items left of the budget (at least the reserved share). Maps are
    /// context, not a requirement: a failure becomes a note.
    pub(super) async fn add_maps(
        &self,
        strategy: &RetrievalStrategyConfig,
        task: &str,
        packs: Vec<&mut StagePack>,
    ) {
        if packs.is_empty() {
            return;
        }
        if !self.maps_on(strategy) {
            if strategy.enabled && self.options.map_share > 0.0 {
                self.add_named_code(packs).await;
            }
            return;
        }
        let mentioned = identifiers(task, 16);
        let requests: Vec<_> = packs
            .iter()
            .map(|p| maps::request(p, &mentioned, p.budget_tokens.saturating_sub(p.used_tokens)))
            .collect();
        let share = self.options.ast_map_share;
        let built = self
            .on_index(move |ix| {
                let outlines = ix.outlines()?;
                Ok(requests
                    .iter()
                    .map(|r| maps::build(&outlines, r, share))
                    .collect::<Vec<_>>())
            })
            .await;
        let built = match built {
            Ok(b) => b,
            Err(e) => return note_all(packs, &format!("code maps unavailable: {e}")),
        };
        for (p, m) in packs.into_iter().zip(built) {
            if m.tokens == 0 {
                continue;
            }
            p.used_tokens += m.tokens;
            p.maps = Some(m);
        }
    }

    /// Runs `f` on the workspace index off the async threads (the pool's index is taken and
    /// given back); an error as text, for a note.
    pub(super) async fn on_index<T: Send + 'static>(
        &self,
        f: impl FnOnce(&trellis_index::Index) -> trellis_index::Result<T> + Send + 'static,
    ) -> std::result::Result<T, String> {
        let pool = self.pool.clone();
        let run = tokio::task::spawn_blocking(move || pool.with(|ix| (f(ix), Back::Kept))?);
        match run.await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Document workflows (no AST work, no symbols in the index): the outline of the code
    /// files the pack's document sections name — what a design discussion is about — within
    /// what the items left of the budget. Context, not a requirement: a failure is a note.
    pub(super) async fn add_named_code(&self, packs: Vec<&mut StagePack>) {
        let texts: Vec<Vec<(String, String)>> = packs
            .iter()
            .map(|p| {
                p.items
                    .iter()
                    .filter(|it| it.section.is_some())
                    .map(|it| (it.path.clone(), it.text.clone()))
                    .collect()
            })
            .collect();
        if texts.iter().all(Vec::is_empty) {
            return;
        }
        let built = self
            .on_index(move |ix| {
                Ok(texts
                    .iter()
                    .map(|t| {
                        let refs: Vec<(&str, &str)> =
                            t.iter().map(|(p, x)| (p.as_str(), x.as_str())).collect();
                        ix.named_code_outlines(&refs, NAMED_CODE_FILES)
                    })
                    .collect::<Vec<_>>())
            })
            .await;
        let built = match built {
            Ok(b) => b,
            Err(e) => return note_all(packs, &format!("code outlines unavailable: {e}")),
        };
        for (p, outlines) in packs.into_iter().zip(built) {
            let m = maps::build_named(&outlines, p.budget_tokens.saturating_sub(p.used_tokens));
            if m.tokens == 0 {
                continue;
            }
            p.notes.push(format!(
                "outlined the code files the documents name: {}",
                m.files.join(", ")
            ));
            p.used_tokens += m.tokens;
            p.maps = Some(m);
        }
    }
}
