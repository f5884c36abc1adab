//! Code maps in stage packs (`ast_context_map`): code workflows get the AST context
//! map of the items' files and a repo map within the stage budget; document workflows and
//! `map_share = 0` get none.

use tokio_util::sync::CancellationToken;
use trellis_agents::StagePack;
use trellis_agents::retrieval::{RetrievalOptions, strategy_of};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::ScriptedProvider;

use super::retrieval::{TASK, agent, plan, queries, write_fixture};

const CHECKOUT_PY: &str = r#"from src.calc import total
from src.tax import apply_tax
from src.payments import charge_card


def checkout(cart, rate, card_token):
    """Charges a cart: its total with tax."""
    return charge_card(card_token, apply_tax(total(cart.items), rate))
"#;

const PAYMENTS_PY: &str = r#"class PaymentGateway:
    """The card processor's client."""

    def submit(self, request):
        raise NotImplementedError


def charge_card(card_token, amount_cents):
    """Charges a card through the gateway."""
    return PaymentGateway().submit({"token": card_token, "amount": amount_cents})
"#;

const TAX_PY: &str = r#"def apply_tax(amount, rate):
    """Adds the tax at `rate` to `amount`."""
    return amount * (1 + rate)


class TaxTable:
    """Rates by region."""

    def rate_for(self, region):
        return 0.2
"#;

fn write_more(root: &std::path::Path) {
    std::fs::write(root.join("src/checkout.py"), CHECKOUT_PY).unwrap();
    std::fs::write(root.join("src/tax.py"), TAX_PY).unwrap();
    std::fs::write(root.join("src/payments.py"), PAYMENTS_PY).unwrap();
}

/// The files the repo map lists (its unindented `path:` lines).
fn repo_map_files(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
        .map(|l| l.trim_end_matches(':').to_owned())
        .collect()
}

async fn code_packs(
    options: RetrievalOptions,
    budget: u64,
) -> (TempWorkspace, std::collections::BTreeMap<String, StagePack>) {
    let ws = TempWorkspace::new("retr-maps").unwrap();
    write_fixture(ws.path());
    write_more(ws.path());
    let plan = plan("feature_with_iterative_testing", &[], TASK);
    let mut strategy = strategy_of(&plan).unwrap();
    assert!(strategy.ast_enabled());
    strategy.retrieval_hints.token_budget.insert(
        trellis_index::strategy::StageKey("code_generation".into()),
        budget,
    );
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let provider = ScriptedProvider::new([queries(&["total of a cart"]), queries(&["tests"])]);
    let agent = agent(ws.path(), &provider, options);
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    let packs = agent
        .upfront(TASK, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();
    (ws, packs)
}

#[tokio::test]
async fn code_stages_get_the_ast_context_map_of_their_files_and_a_repo_map_within_budget() {
    let (_ws, packs) = code_packs(RetrievalOptions::default(), 300).await;
    let code = &packs["code_generation"];
    let maps = code.maps.as_ref().expect("a code stage has maps");
    // Budget: items and maps together; the items kept out of the reserved share.
    assert!(code.used_tokens <= 300, "{code:?}");
    let items: usize = code.items.iter().map(|i| i.tokens).sum();
    assert!(items <= 300 - 60, "items {items} ate the maps' share");
    assert_eq!(code.used_tokens, items + maps.tokens);
    assert!(maps.tokens > 0);

    // The AST map covers exactly the code files of the items, in pack order.
    let mut item_files: Vec<&str> = Vec::new();
    for it in code.items.iter().filter(|i| i.section.is_none()) {
        if !item_files.contains(&it.path.as_str()) {
            item_files.push(&it.path);
        }
    }
    assert!(item_files.contains(&"src/calc.py"), "{code:?}");
    let mapped: Vec<&str> = maps
        .ast_context_map
        .files
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(mapped, item_files);
    // Its entries are the index's symbols: `total` with its parameter list.
    let calc =
        &maps.ast_context_map.files[mapped.iter().position(|p| *p == "src/calc.py").unwrap()];
    let total = calc.functions.iter().find(|f| f.name == "total").unwrap();
    assert_eq!(total.params, "(items)");
    assert!(
        maps.ast_text.contains("  def total(items)  [9-14]\n"),
        "{}",
        maps.ast_text
    );

    // The repo map lists other files only, with definitions the files in play use.
    let listed = repo_map_files(&maps.repo_map);
    assert!(!listed.is_empty(), "{}", maps.repo_map);
    for f in &listed {
        assert!(
            !item_files.contains(&f.as_str()),
            "{f} is in play: {}",
            maps.repo_map
        );
    }

    // Both are in the prompt text, after the items.
    let md = code.render();
    let ast_at = md
        .find("### AST context map of the files above")
        .expect(&md);
    let repo_at = md.find("### Repository map").expect(&md);
    let last_item = md.rfind("— codebase_semantic_search").unwrap();
    assert!(last_item < ast_at && ast_at < repo_at, "{md}");
    // Stored packs round-trip with their maps.
    let back: StagePack = serde_json::from_str(&serde_json::to_string(code).unwrap()).unwrap();
    assert_eq!(&back, code);
}

#[tokio::test]
async fn a_small_budget_cuts_the_maps_to_whole_lines_and_says_so() {
    let (_ws, packs) = code_packs(RetrievalOptions::default(), 120).await;
    let code = &packs["code_generation"];
    assert!(code.used_tokens <= 120, "{code:?}");
    if let Some(m) = &code.maps {
        assert!(m.ast_text.is_empty() || m.ast_text.ends_with('\n'));
        if m.ast_left_out > 0 {
            assert!(
                code.render()
                    .contains("more entries left out for the budget")
            );
        }
    }
}

#[tokio::test]
async fn map_share_zero_turns_the_maps_off_and_gives_items_the_whole_budget() {
    let options = RetrievalOptions {
        map_share: 0.0,
        ..RetrievalOptions::default()
    };
    let (_ws, packs) = code_packs(options, 400).await;
    for p in packs.values() {
        assert!(p.maps.is_none(), "{p:?}");
        assert!(!p.render().contains("AST context map"));
        assert_eq!(
            p.used_tokens,
            p.items.iter().map(|i| i.tokens).sum::<usize>()
        );
    }
}

#[tokio::test]
async fn document_workflows_get_no_code_maps() {
    let ws = TempWorkspace::new("retr-maps-docs").unwrap();
    write_fixture(ws.path());
    let task = "Discuss the architecture decision on how prices are stored";
    let plan = plan("architecture_discussion", &[], task);
    let strategy = strategy_of(&plan).unwrap();
    assert!(!strategy.ast_enabled());
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let provider = ScriptedProvider::new([queries(&["integer cents decision"])]);
    let agent = agent(ws.path(), &provider, RetrievalOptions::default());
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    let packs = agent
        .upfront(task, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();
    for p in packs.values() {
        assert!(p.maps.is_none(), "{p:?}");
        assert!(!p.items.is_empty());
    }
}
