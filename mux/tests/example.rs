//! `examples/belfry.kdl`, the commented declaration the README points a newcomer at, stays a
//! valid file: it loads, it declares a toy mail-reading agent, a harness agent with an adapter and a
//! charter, and an agent with the rich `ding {}` block, and every adapter it names is one the
//! binary has built in.

use std::path::Path;

use belfry_ding::policy::DeliveryPolicy;
use belfry_mux::adapters::Adapters;
use belfry_mux::declare::load;

fn example() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/belfry.kdl")
}

#[test]
fn the_example_declaration_loads_with_one_agent_of_each_kind() {
    let declarations = load(&example()).unwrap_or_else(|err| panic!("{err}"));
    let mail = declarations.get("mail").expect("the toy mail agent");
    assert_eq!(mail.adapter, None);
    assert_eq!(mail.ding, DeliveryPolicy::Aggressive);

    let with_charter: Vec<_> = declarations
        .agents
        .iter()
        .filter(|agent| agent.adapter.is_some() && agent.charter.is_some())
        .collect();
    assert!(!with_charter.is_empty(), "no harness agent with a charter");
    for agent in with_charter {
        let charter = agent.charter.as_ref().unwrap();
        assert!(charter.is_file(), "{}: {}", agent.name, charter.display());
    }

    let rich = declarations
        .agents
        .iter()
        .find(|agent| matches!(agent.ding, DeliveryPolicy::Rich { .. }))
        .expect("an agent with the rich ding block");
    assert!(rich.ding.adapter_command().is_some_and(|c| !c.is_empty()));

    for agent in &declarations.agents {
        if let Some(adapter) = &agent.adapter {
            Adapters::Embedded
                .require(adapter)
                .unwrap_or_else(|err| panic!("{}: {err}", agent.name));
        }
    }
}
