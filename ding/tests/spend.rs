//! The spend and quota reader over real files: every adapter's captured usage files
//! (`adapters/*/fixtures/spend/*/`, each with the numbers the scripted model server sent in
//! its `expect.json`), read through that adapter's own declaration; and over files written
//! here, the tail read as it grows, a line cut off mid-write, a replaced file, and each kind of
//! bad file refused with its name, line and problem.

use std::io::Write;
use std::path::{Path, PathBuf};

use belfry_ding::spend::{Place, Quota, Reader, Reading, Section, Spend};
use belfry_ding::Error;
use serde_json::{json, Value};

fn adapters_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters")
}

fn place_of(case: &Path, cwd: &str) -> Place {
    let dir = |name: &str| Some(case.join(name)).filter(|path| path.is_dir());
    Place {
        home: dir("home"),
        cwd: PathBuf::from(cwd),
        state: dir("state"),
    }
}

fn reader(adapter: &str, name: &'static str, declaration: &Value, place: Place) -> Reader {
    let section = Section::from_declaration(adapter, name, declaration)
        .unwrap_or_else(|err| panic!("{adapter}: {err}"));
    Reader::new(name, section, place)
}

fn check_spend(label: &str, reading: Reading<Spend>, want: &Value) {
    if want.get("unsupported").is_some() {
        assert!(
            matches!(&reading, Reading::Unsupported(reason) if !reason.is_empty()),
            "{label}: {reading:?}"
        );
        return;
    }
    let Reading::Read(spend) = reading else {
        panic!("{label}: no spend read: {reading:?}");
    };
    let count = |key: &str| want[key].as_u64();
    assert_eq!(spend.total.input, count("input"), "{label}: input");
    assert_eq!(spend.total.output, count("output"), "{label}: output");
    assert_eq!(
        spend.total.cache_read,
        count("cache_read"),
        "{label}: cache_read"
    );
    assert_eq!(
        spend.total.cache_write,
        count("cache_write"),
        "{label}: cache_write"
    );
    match want["cost_usd"].as_f64() {
        None => assert_eq!(spend.total.cost_usd, None, "{label}: cost"),
        Some(cost) => {
            let read = spend
                .total
                .cost_usd
                .unwrap_or_else(|| panic!("{label}: no cost"));
            assert!((read - cost).abs() < 1e-9, "{label}: cost {read} != {cost}");
        }
    }
    assert_eq!(
        spend.per_turn.len() as u64,
        want["turns"].as_u64().unwrap(),
        "{label}: turns {:?}",
        spend.per_turn
    );
    // A number the adapter calls unpublished is never given a value.
    for field in spend.unsupported.keys() {
        let value = match field.as_str() {
            "cost_usd" => spend.total.cost_usd.map(|_| 0),
            "cache_write" => spend.total.cache_write,
            other => panic!("{label}: unexpected unsupported field {other}"),
        };
        assert_eq!(value, None, "{label}: {field} is declared unpublished");
    }
}

fn check_quota(label: &str, reading: Reading<Quota>, want: &Value) {
    match reading {
        Reading::Unsupported(reason) => {
            assert!(
                want.get("unsupported").is_some(),
                "{label}: unsupported: {reason}"
            )
        }
        Reading::NotYet(_) => assert!(want.get("not_yet").is_some(), "{label}: not yet"),
        Reading::Read(quota) => {
            assert_eq!(quota.used, want["used"].as_f64().unwrap(), "{label}: used");
            assert_eq!(
                quota.limit,
                want["limit"].as_f64().unwrap(),
                "{label}: limit"
            );
            assert_eq!(quota.unit, want["unit"].as_str().unwrap(), "{label}: unit");
            assert_eq!(
                quota.resets_at,
                want["resets_at"].as_u64().unwrap(),
                "{label}: reset"
            );
        }
    }
}

#[test]
fn every_captured_usage_file_reads_as_the_numbers_the_model_server_sent() {
    let mut checked = Vec::new();
    let mut adapters: Vec<PathBuf> = std::fs::read_dir(adapters_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("declaration.json").is_file())
        .collect();
    adapters.sort();
    for adapter_dir in adapters {
        let adapter = adapter_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let text = std::fs::read_to_string(adapter_dir.join("declaration.json")).unwrap();
        let declaration: Value = serde_json::from_str(&text).unwrap();
        let Ok(cases) = std::fs::read_dir(adapter_dir.join("fixtures/spend")) else {
            continue;
        };
        let mut cases: Vec<PathBuf> = cases.map(|entry| entry.unwrap().path()).collect();
        cases.sort();
        for case in cases {
            let want: Value =
                serde_json::from_str(&std::fs::read_to_string(case.join("expect.json")).unwrap())
                    .unwrap();
            let label = format!("{adapter}/{}", case.file_name().unwrap().to_string_lossy());
            let place = place_of(&case, want["cwd"].as_str().unwrap());
            let mut spend = reader(&adapter, "spend", &declaration, place.clone());
            check_spend(&label, spend.spend().unwrap(), &want["spend"]);
            // A second poll with nothing written reads the same numbers (no row counted twice).
            check_spend(&label, spend.spend().unwrap(), &want["spend"]);
            let mut quota = reader(&adapter, "quota", &declaration, place);
            check_quota(&label, quota.quota().unwrap(), &want["quota"]);
            checked.push(label);
        }
    }
    // Every adapter with usage files was read: six harnesses, seventeen captures.
    assert_eq!(checked.len(), 17, "{checked:?}");
}

/// A declaration of a JSONL session file under the home, rows of kind `reply` with a usage
/// object whose prompt total counts its cached part.
fn jsonl_declaration() -> Value {
    json!({"spend": {"sources": [{"kind": "jsonl", "root": "home",
        "path": "sessions/{cwd_sanitized}/*.jsonl",
        "rows": {"where": {"/kind": "reply"}, "unless": {"/failed": true}, "dedupe": "/id"},
        "per_turn": {"input": "/usage/prompt", "output": "/usage/out",
            "cache_read": "/usage/cached", "cost_usd": "/usage/usd"},
        "input_counts_cache": true}],
        "unsupported_fields": {"cache_write": "the test's harness reports none"}},
      "quota": {"sources": [{"kind": "jsonl", "root": "home",
        "path": "sessions/{cwd_sanitized}/*.jsonl",
        "rows": {"where": {"/kind": "limits"}},
        "window": {"used": "/used", "limit": 100, "unit": "percent", "resets_at": "/reset"}}]}})
}

struct Home {
    dir: tempfile::TempDir,
    file: PathBuf,
}

fn home_with(lines: &str) -> Home {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("sessions/-work-project-a");
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("one.jsonl");
    std::fs::write(&file, lines).unwrap();
    Home { dir, file }
}

fn place(home: &Home) -> Place {
    Place {
        home: Some(home.dir.path().to_path_buf()),
        cwd: PathBuf::from("/work/project-a"),
        state: None,
    }
}

fn spend_of(reader: &mut Reader) -> Spend {
    match reader.spend().unwrap() {
        Reading::Read(spend) => spend,
        other => panic!("no spend: {other:?}"),
    }
}

#[test]
fn the_tail_is_read_as_it_grows_and_a_line_cut_off_mid_write_waits_for_its_end() {
    let home = home_with(
        "{\"kind\":\"reply\",\"id\":\"a\",\"usage\":{\"prompt\":100,\"out\":5,\"cached\":60,\"usd\":0.5}}\n",
    );
    let mut reader = reader("test", "spend", &jsonl_declaration(), place(&home));
    let spend = spend_of(&mut reader);
    assert_eq!(
        spend.total.input,
        Some(40),
        "the prompt total less its cached part"
    );
    assert_eq!(spend.total.output, Some(5));
    assert_eq!(
        spend.total.cache_write, None,
        "declared unpublished, never 0"
    );
    assert_eq!(
        spend.unsupported.get("cache_write").map(String::as_str),
        Some("the test's harness reports none")
    );

    // Half a row: nothing new until the rest is written.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&home.file)
        .unwrap();
    file.write_all(b"{\"kind\":\"reply\",\"id\":\"b\",\"usage\":{\"prom")
        .unwrap();
    assert_eq!(spend_of(&mut reader).per_turn.len(), 1);
    file.write_all(b"pt\":10,\"out\":2,\"cached\":0,\"usd\":0.25}}\n")
        .unwrap();
    // The same response written again (one row per content block), a failed turn and another
    // kind of row: none of them counts.
    file.write_all(b"{\"kind\":\"reply\",\"id\":\"b\",\"usage\":{\"prompt\":10,\"out\":2,\"cached\":0,\"usd\":0.25}}\n")
        .unwrap();
    file.write_all(b"{\"kind\":\"reply\",\"id\":\"c\",\"failed\":true,\"usage\":{\"prompt\":0,\"out\":0,\"cached\":0,\"usd\":0}}\n")
        .unwrap();
    file.write_all(b"{\"kind\":\"note\",\"usage\":{\"prompt\":999}}\n")
        .unwrap();
    let spend = spend_of(&mut reader);
    assert_eq!(spend.per_turn.len(), 2);
    assert_eq!(spend.total.input, Some(50));
    assert_eq!(spend.total.output, Some(7));
    assert_eq!(spend.total.cost_usd, Some(0.75));
    assert_eq!(spend.files, vec![home.file.clone()]);

    // The file replaced by a shorter one (a new session in its place): counted afresh.
    std::fs::remove_file(&home.file).unwrap();
    std::fs::write(
        &home.file,
        "{\"kind\":\"reply\",\"id\":\"z\",\"usage\":{\"prompt\":3,\"out\":1,\"cached\":0,\"usd\":0}}\n",
    )
    .unwrap();
    let spend = spend_of(&mut reader);
    assert_eq!(spend.per_turn.len(), 1);
    assert_eq!(spend.total.input, Some(3));
}

#[test]
fn a_usage_window_reads_its_last_row() {
    let home = home_with(
        "{\"kind\":\"limits\",\"used\":40.5,\"reset\":1800000000}\n{\"kind\":\"limits\",\"used\":97,\"reset\":1800000600}\n",
    );
    let mut reader = reader("test", "quota", &jsonl_declaration(), place(&home));
    let Reading::Read(quota) = reader.quota().unwrap() else {
        panic!("no window");
    };
    assert_eq!((quota.used, quota.limit), (97.0, 100.0));
    assert_eq!(quota.resets_at, 1_800_000_600);
    assert_eq!(quota.unit, "percent");
}

#[test]
fn no_file_yet_and_unsupported_are_said_never_read_as_zero() {
    let dir = tempfile::tempdir().unwrap();
    let empty = Place {
        home: Some(dir.path().to_path_buf()),
        cwd: PathBuf::from("/work/project-a"),
        state: None,
    };
    let mut spend = reader("test", "spend", &jsonl_declaration(), empty.clone());
    assert_eq!(
        spend.spend().unwrap(),
        Reading::NotYet(vec!["{home}/sessions/-work-project-a/*.jsonl".into()])
    );
    let declaration = json!({"quota": {"unsupported": "the harness shows no window"}});
    let mut quota = reader("test", "quota", &declaration, empty.clone());
    assert_eq!(
        quota.quota().unwrap(),
        Reading::Unsupported("the harness shows no window".into())
    );
    let mut none = reader("test", "spend", &json!({}), empty);
    assert_eq!(
        none.spend().unwrap(),
        Reading::Unsupported("adapter \"test\" declares no spend section".into())
    );
}

fn error_of(lines: &str) -> String {
    let home = home_with(lines);
    let mut reader = reader("test", "spend", &jsonl_declaration(), place(&home));
    let err = reader.spend().unwrap_err();
    assert!(matches!(err, Error::MeterFile { .. }), "{err:?}");
    err.to_string()
        .replace(&home.file.display().to_string(), "FILE")
}

#[test]
fn a_bad_usage_file_is_refused_naming_the_file_the_line_and_the_problem() {
    assert_eq!(
        error_of("{\"kind\":\"note\"}\nnot json\n"),
        "usage file FILE line 2: is not a JSON line: expected ident at line 1 column 2"
    );
    assert_eq!(
        error_of("{\"kind\":\"reply\",\"usage\":{\"prompt\":\"many\",\"out\":1,\"cached\":0,\"usd\":0}}\n"),
        "usage file FILE line 1: /usage/prompt is not a whole number of tokens: \"many\""
    );
    assert_eq!(
        error_of(
            "{\"kind\":\"reply\",\"usage\":{\"prompt\":10,\"out\":1,\"cached\":20,\"usd\":0}}\n"
        ),
        "usage file FILE line 1: the prompt total 10 is smaller than its cached part 20"
    );
    assert_eq!(
        error_of(
            "{\"kind\":\"reply\",\"usage\":{\"prompt\":10,\"out\":1,\"cached\":2,\"usd\":-1}}\n"
        ),
        "usage file FILE line 1: /usage/usd is not a cost: -1"
    );
}

#[test]
fn a_bad_declaration_is_refused_naming_the_adapter_and_the_problem() {
    let err = |declaration: Value| {
        Section::from_declaration("test", "spend", &declaration)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(json!({"spend": {}})),
        "the spend section of adapter \"test\"'s declaration is invalid: has neither `sources` (a list) nor `unsupported` (a reason)"
    );
    assert_eq!(
        err(json!({"spend": {"sources": [{"kind": "jsonl", "root": "home", "path": "../x", "per_turn": {"input": "/a"}}]}})),
        "the spend section of adapter \"test\"'s declaration is invalid: sources[0]: path \"../x\" must stay under its root (relative, no `..`)"
    );
    assert_eq!(
        err(json!({"spend": {"sources": [{"kind": "jsonl", "root": "home", "path": "x", "per_turn": {"tokens": "/a"}}]}})),
        "the spend section of adapter \"test\"'s declaration is invalid: sources[0]: per_turn.tokens is not a number this reader knows (input, output, cache_read, cache_write, cost_usd)"
    );
    assert_eq!(
        err(json!({"spend": {"sources": [{"kind": "csv", "root": "home", "path": "x"}]}})),
        "the spend section of adapter \"test\"'s declaration is invalid: sources[0]: kind \"csv\" is not json, jsonl or sqlite"
    );
}
