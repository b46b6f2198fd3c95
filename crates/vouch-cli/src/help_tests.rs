//! The command line means what it says (issue 11 #9): every argument and option of every
//! command has help text, and help cites nothing a user cannot open.

use crate::Cli;
use clap::CommandFactory as _;

fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
    let here = format!("{path} {}", cmd.get_name());
    if cmd.get_about().is_none() && !here.ends_with(" help") {
        out.push(format!("{here}: the command has no help"));
    }
    for a in cmd.get_arguments() {
        let id = a.get_id().as_str();
        if matches!(id, "help" | "version") {
            continue;
        }
        if a.get_help().is_none() && a.get_long_help().is_none() {
            out.push(format!("{here}: `{id}` has no help"));
        }
        let text = format!(
            "{} {}",
            a.get_help().map(|h| h.to_string()).unwrap_or_default(),
            a.get_long_help().map(|h| h.to_string()).unwrap_or_default()
        );
        cite_check(&here, id, &text, out);
    }
    let about = format!(
        "{} {}",
        cmd.get_about().map(|h| h.to_string()).unwrap_or_default(),
        cmd.get_long_about()
            .map(|h| h.to_string())
            .unwrap_or_default()
    );
    cite_check(&here, "(about)", &about, out);
    for sub in cmd.get_subcommands() {
        walk(sub, &here, out);
    }
}

/// Help may point to files in the repository (docs/…, corpus/) and to commands, never to a
/// section sign without its document or to files outside the repository.
fn cite_check(here: &str, id: &str, text: &str, out: &mut Vec<String>) {
    if text.contains('§') {
        out.push(format!(
            "{here}: `{id}` cites a § a user cannot open: {text}"
        ));
    }
    if text.contains("scenarios.md") || text.contains("shared/") {
        out.push(format!(
            "{here}: `{id}` cites a file outside the repository: {text}"
        ));
    }
}

#[test]
fn every_argument_and_option_has_help_and_cites_nothing_unopenable() {
    let mut problems = vec![];
    walk(&Cli::command(), "", &mut problems);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_files_help_points_to_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut text = String::new();
    fn all(cmd: &clap::Command, text: &mut String) {
        for a in cmd.get_arguments() {
            if let Some(h) = a.get_help() {
                text.push_str(&h.to_string());
                text.push('\n');
            }
        }
        for s in cmd.get_subcommands() {
            all(s, text);
        }
    }
    all(&Cli::command(), &mut text);
    for word in text.split(|c: char| c.is_whitespace() || c == ')' || c == '(' || c == ',') {
        let word = word.trim_end_matches(['.', ':', ';']);
        if word.starts_with("docs/") || word.starts_with("examples/") {
            assert!(
                root.join(word).exists(),
                "help points to {word}, which does not exist"
            );
        }
    }
}

/// The help people read, as data: a change to any of it shows in review.
#[test]
fn help_snapshots() {
    let mut cmd = Cli::command();
    cmd.build();
    // Commands whose help is this change's; the top level and `serve` grow with other work.
    for path in [
        vec!["run"],
        vec!["approve"],
        vec!["journal"],
        vec!["runs", "list"],
        vec!["schedule", "add"],
    ] {
        let mut c = &mut cmd;
        for p in &path {
            c = c.find_subcommand_mut(p).expect("a subcommand");
        }
        let help = c.render_long_help().to_string();
        let name = format!("vouch_{}", path.join("_"));
        insta::assert_snapshot!(name, help);
    }
}
