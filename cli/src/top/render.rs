//! The live view's frame: a fixed-size grid of text lines, built from a [`Fleet`] and the
//! view's own state, with no terminal in sight.
//!
//! The frame is exactly `height` lines of exactly `width` characters (padded or cut), so the
//! session loop can write it over the previous one without clearing, and a test can snapshot
//! the first frame of a known fleet. Which line is selected is part of the model (drawn in
//! reverse video by the loop, and marked `>` in the text so the model says it too).

use belfry_cli::keys::{edit_name_filter, FilterEdit, ViewKey};
use belfry_proto::program_status::ProgramState;

use super::fleet::{adapter_state, Fleet, Mail, PaneView};
use crate::human;

/// One line of the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Line {
    /// Exactly the frame's width in characters.
    pub(crate) text: String,
    /// How the line is drawn.
    pub(crate) style: Style,
}

/// How a line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    /// The title and the column headings.
    Heading,
    /// The selected pane.
    Selected,
}

/// A screen of text shown over the list (a pane's screen, its DING status), until a key.
#[derive(Debug, Clone)]
pub(crate) struct Overlay {
    pub(crate) title: String,
    pub(crate) lines: Vec<String>,
}

/// An action on a pane that ends or restarts its program: asked for with a key, carried out
/// only after `y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Confirm {
    /// `K`: end the pane, its program and its pane host.
    Kill,
    /// `R`: restart the pane's program (a new incarnation).
    Restart,
}

impl Confirm {
    /// The question on the last line; `own` when the pane is the one this view runs in.
    pub(crate) fn question(self, name: &str, own: bool) -> String {
        let own = if own { " (this view's own pane)" } else { "" };
        match self {
            Confirm::Kill => format!("kill {name}{own}, its program and its pane host? y kills it, any other key keeps it"),
            Confirm::Restart => format!("restart {name}'s program{own}? y restarts it, any other key keeps it running"),
        }
    }
}

/// The view's own state: which pane is selected, which panes the filter lets through, what is
/// shown over the list, and the line of news at the bottom.
#[derive(Debug, Default)]
pub(crate) struct Ui {
    /// The selected pane, by name, so the selection stays on it as others come and go.
    pub(crate) selected: Option<String>,
    /// Only the panes whose names hold this (in any case) are listed; empty, every pane is.
    pub(crate) filter: String,
    /// Whether keys go to the filter (after `/`, until Enter or Escape).
    pub(crate) typing: bool,
    /// An action asked for that waits for `y`, and the pane it is for.
    pub(crate) confirm: Option<(Confirm, String)>,
    /// The pane this view runs in, if it runs in one (`$BELFRY_SESSION`).
    pub(crate) own: Option<String>,
    /// The first pane shown, when there are more panes than lines.
    pub(crate) offset: usize,
    pub(crate) overlay: Option<Overlay>,
    /// What the last action did, or what went wrong.
    pub(crate) status: String,
}

impl Ui {
    /// The panes listed: those the filter lets through, the ones that need a person first
    /// (see [`urgency`]), then in name order.
    pub(crate) fn shown<'f>(&self, fleet: &'f Fleet) -> Vec<&'f PaneView> {
        let filter = self.filter.to_lowercase();
        let mut shown: Vec<&PaneView> = fleet
            .panes()
            .filter(|pane| pane.record.session.to_lowercase().contains(&filter))
            .collect();
        // A stable sort: panes of the same urgency keep the fleet's name order.
        shown.sort_by_key(|pane| urgency(pane));
        shown
    }

    /// The selected pane's index among the panes listed, selecting the first one listed if
    /// the selected one is gone or filtered out (or none is selected).
    pub(crate) fn selected_index(&mut self, fleet: &Fleet) -> Option<usize> {
        let shown = self.shown(fleet);
        let found = self
            .selected
            .as_deref()
            .and_then(|name| shown.iter().position(|pane| pane.record.session == name));
        let index = match found {
            Some(index) => index,
            None if !shown.is_empty() => 0,
            None => {
                self.selected = None;
                return None;
            }
        };
        self.selected = Some(shown[index].record.session.clone());
        Some(index)
    }

    /// Moves the selection `by` panes, staying within the panes listed.
    pub(crate) fn move_selection(&mut self, fleet: &Fleet, by: isize) {
        let Some(index) = self.selected_index(fleet) else {
            return;
        };
        let shown = self.shown(fleet);
        let last = shown.len().saturating_sub(1);
        let moved = index.saturating_add_signed(by).min(last);
        self.selected = shown.get(moved).map(|pane| pane.record.session.clone());
    }

    /// A key while the filter is typed: text (typed or pasted; pane names are ASCII),
    /// Backspace, Enter to keep the filter, Escape to drop it.
    pub(crate) fn filter_key(&mut self, key: ViewKey) {
        if let FilterEdit::Kept | FilterEdit::Dropped = edit_name_filter(&mut self.filter, key) {
            self.typing = false;
        }
    }
}

/// The keys, on the last line.
const KEYS: &str = "j/k select  enter attach  p peek  d ding  / filter  R restart  K kill  q quit";

/// One column of the pane table.
struct Column {
    heading: &'static str,
    /// The most characters its cells take (cut longer, ending in `~`); `None` for the last
    /// column, which takes the rest of the line.
    cap: Option<usize>,
    align: Align,
    /// When a terminal too narrow for every column leaves it out: never for 0, and the
    /// higher, the sooner.
    drop: u8,
}

/// The columns of the pane table. Each is as wide as its widest cell (its heading included),
/// up to its cap; on a narrow terminal the least needed go first (see [`layout`]), so the name,
/// the state and the last event stay in sight at 80 columns and less.
#[rustfmt::skip]
const COLUMNS: [Column; 12] = [
    Column { heading: "NAME", cap: Some(16), align: Align::Left, drop: 0 },
    Column { heading: "PROGRAM", cap: Some(14), align: Align::Left, drop: 3 },
    Column { heading: "STATE", cap: Some(28), align: Align::Left, drop: 0 },
    Column { heading: "REV", cap: Some(16), align: Align::Right, drop: 4 },
    Column { heading: "REV/S", cap: Some(6), align: Align::Right, drop: 9 },
    Column { heading: "CL", cap: Some(3), align: Align::Right, drop: 8 },
    Column { heading: "UNRD", cap: Some(4), align: Align::Right, drop: 1 },
    Column { heading: "HELD", cap: Some(4), align: Align::Right, drop: 6 },
    Column { heading: "STGD", cap: Some(4), align: Align::Right, drop: 7 },
    Column { heading: "HOLD", cap: Some(20), align: Align::Left, drop: 2 },
    Column { heading: "AGE", cap: Some(6), align: Align::Right, drop: 5 },
    Column { heading: "LAST EVENT", cap: None, align: Align::Left, drop: 0 },
];

/// The characters the last column (the last event) keeps on a narrow terminal: the other
/// columns give way before it gets less.
const LAST_EVENT_ROOM: usize = 24;

/// The columns shown: each one's index in [`COLUMNS`] and its width (`None` for the last).
type Layout = Vec<(usize, Option<usize>)>;

/// The columns a frame `width` characters wide shows for `rows` (each a cell per column), and
/// how wide each is. Left out, in the order of their [`Column::drop`], are as many as it
/// takes to leave the last column [`LAST_EVENT_ROOM`] characters; the ones never dropped stay
/// however narrow the terminal (the frame cuts the line).
fn layout(rows: &[Vec<String>], width: usize) -> Layout {
    let mut shown: Layout = COLUMNS
        .iter()
        .enumerate()
        .map(|(at, column)| {
            let widest = rows
                .iter()
                .filter_map(|cells| cells.get(at))
                .map(|cell| cell.chars().count())
                .fold(column.heading.len(), usize::max);
            (at, column.cap.map(|cap| widest.min(cap)))
        })
        .collect();
    // The selection marker and its space, then each fixed column and the space after it.
    let used = |shown: &Layout| -> usize {
        2 + shown
            .iter()
            .filter_map(|(_, width)| width.map(|w| w + 1))
            .sum::<usize>()
    };
    while used(&shown) + LAST_EVENT_ROOM > width {
        let Some(next) = shown
            .iter()
            .enumerate()
            .filter(|(_, (at, _))| COLUMNS[*at].drop > 0)
            .max_by_key(|(_, (at, _))| COLUMNS[*at].drop)
            .map(|(index, _)| index)
        else {
            break;
        };
        shown.remove(next);
    }
    shown
}

#[derive(Debug, Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// The frame for `fleet` at `now_ms` (the wall clock, for ages), `clock` being the time of
/// day to show in the title.
pub(crate) fn frame(
    fleet: &Fleet,
    ui: &mut Ui,
    now_ms: u64,
    clock: &str,
    width: usize,
    height: usize,
) -> Vec<Line> {
    let mut lines = Vec::with_capacity(height);
    if let Some(overlay) = &ui.overlay {
        lines.push(line(&overlay.title, width, Style::Heading));
        let room = height.saturating_sub(2);
        for text in overlay.lines.iter().take(room) {
            lines.push(line(text, width, Style::Plain));
        }
        fill(&mut lines, width, height.saturating_sub(1));
        lines.push(line("any key: back to the list", width, Style::Plain));
        lines.truncate(height);
        return lines;
    }
    lines.push(line(&title(fleet, clock), width, Style::Heading));
    let shown = ui.shown(fleet);
    let rows: Vec<Vec<String>> = shown.iter().map(|pane| cells(pane, now_ms)).collect();
    let layout = layout(&rows, width);
    lines.push(line(&heading(&layout, width), width, Style::Heading));
    let room = height.saturating_sub(3);
    let selected = ui.selected_index(fleet);
    if let Some(index) = selected {
        // The selected pane stays in sight: the window scrolls to it.
        if index < ui.offset {
            ui.offset = index;
        } else if room > 0 && index >= ui.offset + room {
            ui.offset = index + 1 - room;
        }
    }
    if fleet.len() == 0 {
        lines.push(line(
            "  no panes (belfry new NAME -- CMD starts one)",
            width,
            Style::Plain,
        ));
    } else if shown.is_empty() {
        let none = format!(
            "  no pane's name holds {:?} (Escape shows them all)",
            ui.filter
        );
        lines.push(line(&none, width, Style::Plain));
    }
    for (index, cells) in rows.iter().enumerate().skip(ui.offset).take(room) {
        let chosen = Some(index) == selected;
        let (marker, style) = if chosen {
            (">", Style::Selected)
        } else {
            (" ", Style::Plain)
        };
        let text = format!(
            "{marker} {}",
            cells_line(cells, &layout, width.saturating_sub(2))
        );
        lines.push(line(&text, width, style));
    }
    fill(&mut lines, width, height.saturating_sub(1));
    let keys = if let Some((action, name)) = &ui.confirm {
        action.question(name, ui.own.as_deref() == Some(name))
    } else if ui.typing {
        format!(
            "/{}  (enter keeps the filter, escape drops it)  {} of {} pane(s)",
            ui.filter,
            shown.len(),
            fleet.len()
        )
    } else if !ui.filter.is_empty() {
        format!(
            "filter {:?}: {} of {} pane(s)  |  {KEYS}",
            ui.filter,
            shown.len(),
            fleet.len()
        )
    } else {
        KEYS.to_string()
    };
    let footer = if ui.status.is_empty() {
        keys
    } else {
        format!("{keys}  |  {}", ui.status)
    };
    lines.push(line(&footer, width, Style::Plain));
    lines.truncate(height);
    lines
}

/// Pads `lines` with blank lines up to `height`.
fn fill(lines: &mut Vec<Line>, width: usize, height: usize) {
    while lines.len() < height {
        lines.push(line("", width, Style::Plain));
    }
}

fn title(fleet: &Fleet, clock: &str) -> String {
    let mail = fleet
        .panes()
        .filter_map(|pane| pane.ding.as_ref().map(Mail::of))
        .fold((0, 0), |(unread, held), mail| {
            (unread + mail.unread, held + mail.held)
        });
    format!(
        "belfry top  {} pane(s), {} unread message(s), {} held  {clock}",
        fleet.len(),
        mail.0,
        mail.1
    )
}

fn heading(layout: &Layout, width: usize) -> String {
    let cells: Vec<String> = COLUMNS
        .iter()
        .map(|column| column.heading.to_string())
        .collect();
    format!("  {}", cells_line(&cells, layout, width.saturating_sub(2)))
}

/// One pane's cells, one per column of [`COLUMNS`].
fn cells(pane: &PaneView, now_ms: u64) -> Vec<String> {
    let record = &pane.record;
    let mail = pane.ding.as_ref().map(Mail::of);
    let count = |n: Option<usize>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
    let program = record
        .argv
        .as_deref()
        .map(|argv| crate::cmd::escape_for_terminal(&argv.join(" ")))
        .unwrap_or_else(|| record.error.clone().unwrap_or_default());
    let age = record.started_at.map_or_else(
        || "-".to_string(),
        |at| human::coarse(now_ms.saturating_sub(at)),
    );
    vec![
        record.session.clone(),
        program,
        state(pane, now_ms),
        record
            .revision
            .map_or_else(|| "-".into(), |r| r.to_string()),
        pane.rate
            .map_or_else(|| "-".into(), |rate| format!("{rate:.1}")),
        count(record.clients),
        count(mail.as_ref().map(|m| m.unread)),
        count(mail.as_ref().map(|m| m.held)),
        count(mail.as_ref().map(|m| m.staged)),
        mail.and_then(|m| m.hold_reason)
            .unwrap_or_else(|| "-".into()),
        age,
        last_event(pane, now_ms),
    ]
}

/// Where a pane stands in the list, first first: a program that reports it waits for a person
/// (`blocked`: a permission, a question, a sign-in), the one waiting longest first; then one
/// that reports an error, then one at work, then a finished one, then an idle one; last the
/// panes whose program reports nothing (an exited pane among them). A person looking at the
/// view wants first what only they can unblock; what runs or rests can wait.
fn urgency(pane: &PaneView) -> (u8, u64) {
    let running = pane.record.error.is_none() && !matches!(pane.record.exited, Some(Some(_)));
    let Some(status) = pane.record.program_status.as_ref().filter(|_| running) else {
        return (6, 0);
    };
    let rank = match status.state {
        ProgramState::Blocked => 0,
        ProgramState::Error => 1,
        ProgramState::Working => 2,
        ProgramState::Done => 3,
        ProgramState::Idle => 4,
    };
    // Among the blocked, the one that entered its state first (the smallest `since`) waits
    // longest; the others keep name order.
    let since = if rank == 0 { status.since } else { 0 };
    (rank, since)
}

/// The pane's state: why its pane host could not be asked, how its program ended, what the
/// program reports of itself (OSC 7501), what its adapter says it is doing, or `running`.
fn state(pane: &PaneView, now_ms: u64) -> String {
    let record = &pane.record;
    if record.error.is_some() {
        return record.state.clone().unwrap_or_else(|| "error".into());
    }
    if let Some(Some(exit)) = &record.exited {
        return match (exit.code, exit.signal) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(signal)) => format!("signal {signal}"),
            (None, None) => "exited".into(),
        };
    }
    if let Some(record) = &pane.record.program_status {
        // What it waits for and for how long: `needs you: permission 3 min`.
        return human::status_words(record, now_ms);
    }
    pane.ding
        .as_ref()
        .and_then(adapter_state)
        .unwrap_or_else(|| "running".into())
}

/// The newer of the last stream event and the last adapter line, with its age.
fn last_event(pane: &PaneView, now_ms: u64) -> String {
    let adapter = pane.ding.as_ref().and_then(|status| {
        let event = &status["last_event"];
        let at = event["received_at_unix_ms"].as_u64()?;
        let kind = event["kind"].as_str()?;
        let summary = event["summary"].as_str().unwrap_or_default();
        Some((format!("{kind}: {summary}"), at))
    });
    let newest = match (&pane.last_event, adapter) {
        (Some(stream), Some(adapter)) if adapter.1 > stream.1 => Some(adapter),
        (Some(stream), _) => Some(stream.clone()),
        (None, adapter) => adapter,
    };
    match newest {
        Some((words, at)) => format!("{words} ({})", human::ago(at, now_ms)),
        None => "-".into(),
    }
}

/// The cells of the columns `layout` shows, each cut or padded to its width, the last cut to
/// what is left of `room` characters.
fn cells_line(cells: &[String], layout: &Layout, room: usize) -> String {
    let mut out = String::new();
    for &(at, width) in layout {
        let cell = cells.get(at).map_or("", String::as_str);
        match width {
            Some(width) => {
                let cut = cut(cell, width);
                let pad = " ".repeat(width - cut.chars().count());
                match COLUMNS[at].align {
                    Align::Left => out.push_str(&format!("{cut}{pad} ")),
                    Align::Right => out.push_str(&format!("{pad}{cut} ")),
                }
            }
            None => {
                let left = room.saturating_sub(out.chars().count());
                out.push_str(&cut(cell, left));
            }
        }
    }
    out
}

/// `text` cut to `width` characters, a cut one ending in `~` so it does not pass for whole.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('~');
    cut
}

/// A line of exactly `width` characters.
fn line(text: &str, width: usize, style: Style) -> Line {
    let mut text: String = text.chars().take(width).collect();
    let short = width - text.chars().count();
    text.push_str(&" ".repeat(short));
    Line { text, style }
}

#[cfg(test)]
mod tests {
    use super::*;
    use belfry_proto::program_status::{BlockedKind, StatusRecord};
    use belfry_proto::reply::PaneRecord;
    use belfry_proto::{ExitStatus, Size};
    use serde_json::json;

    const NOW: u64 = 1_785_070_010_000;

    fn pane(session: &str, argv: &[&str], revision: u64, clients: usize) -> PaneRecord {
        let mut record = PaneRecord::unanswered(session, 4_000, "", String::new());
        record.state = None;
        record.error = None;
        record.child_pid = Some(4_001);
        record.argv = Some(argv.iter().map(|a| a.to_string()).collect());
        record.started_at = Some(NOW - 125_000);
        record.revision = Some(revision);
        record.exited = Some(None);
        record.size = Size::new(24, 80).ok();
        record.clients = Some(clients);
        record
    }

    /// Three panes: an agent whose adapter says idle with held and staged mail, a shell with
    /// no adapter, and a program that exited; the second listing two seconds after the first
    /// gives the rates.
    fn fleet() -> Fleet {
        let mut fleet = Fleet::default();
        let listing = |worker: u64, shell: u64| {
            let mut done = pane("done", &["make", "test"], 310, 0);
            done.exited = Some(Some(ExitStatus {
                code: Some(2),
                signal: None,
            }));
            vec![
                pane("worker", &["agent-cli", "--resume"], worker, 1),
                pane("shell", &["sh", "-i"], shell, 0),
                done,
            ]
        };
        fleet.update_listing(listing(100, 7), NOW - 2_000);
        fleet.update_listing(listing(130, 7), NOW);
        fleet.update_ding(
            "worker",
            Some(json!({
                "adapter": {"state": "running", "pid": 4_242},
                "last_event": {"kind": "activity", "sequence": 8,
                               "received_at_unix_ms": NOW - 3_000,
                               "summary": "idle, composer nonempty, revision 130"},
                "lease": {"state": "held", "reason": "composer-nonempty"},
                "messages": [{"state": "held:composer-nonempty"}, {"state": "staged"}],
            })),
        );
        fleet.update_ding(
            "shell",
            Some(json!({
                "adapter": {"state": "not-configured"},
                "last_event": null,
                "lease": {"state": "not-applicable"},
                "messages": [],
            })),
        );
        let spawned = json!({"event": "lifecycle", "session": "shell", "what": "spawned"});
        fleet.note_event(&spawned, NOW - 65_000);
        let exit = json!({"event": "exit", "session": "done", "incarnation": "i",
                          "revision": 310, "code": 2, "signal": null});
        fleet.note_event(&exit, NOW - 1_000);
        fleet
    }

    fn text(lines: &[Line]) -> String {
        lines
            .iter()
            .map(|line| line.text.trim_end())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_first_frame_of_a_fleet() {
        let fleet = fleet();
        let mut ui = Ui::default();
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 140, 10);
        assert_eq!(lines.len(), 10);
        assert!(lines.iter().all(|line| line.text.chars().count() == 140));
        // The first pane in name order is selected until a key moves the selection.
        let selected: Vec<_> = lines
            .iter()
            .filter(|line| line.style == Style::Selected)
            .collect();
        assert_eq!(selected.len(), 1);
        assert!(
            selected[0].text.starts_with("> done"),
            "{}",
            selected[0].text
        );
        insta::assert_snapshot!(text(&lines));
    }

    #[test]
    fn the_selection_moves_and_scrolls_into_sight() {
        let fleet = fleet();
        let mut ui = Ui::default();
        ui.move_selection(&fleet, 5);
        assert_eq!(ui.selected.as_deref(), Some("worker"));
        // Four lines leave room for one pane: the window follows the selection.
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 60, 4);
        assert!(lines[2].text.starts_with("> worker"), "{}", text(&lines));
        ui.move_selection(&fleet, -1);
        assert_eq!(ui.selected.as_deref(), Some("shell"));
    }

    #[test]
    fn an_overlay_covers_the_list_until_a_key() {
        let fleet = fleet();
        let mut ui = Ui {
            overlay: Some(Overlay {
                title: "peek shell".into(),
                lines: vec!["$ echo hi".into(), "hi".into()],
            }),
            ..Ui::default()
        };
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 30, 5);
        insta::assert_snapshot!(text(&lines), @r"
        peek shell
        $ echo hi
        hi

        any key: back to the list
        ");
    }

    /// At 80 columns and less the least needed columns give way, so the name, the state and
    /// the last event stay in sight; the program, the unread count and the hold reason go
    /// last.
    #[test]
    fn a_narrow_terminal_leaves_columns_out_before_the_last_event() {
        let fleet = fleet();
        let mut ui = Ui::default();
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 80, 6);
        assert!(lines.iter().all(|line| line.text.chars().count() == 80));
        insta::assert_snapshot!(text(&lines), @r"
        belfry top  3 pane(s), 2 unread message(s), 1 held  14:02:11
          NAME   PROGRAM        STATE   UNRD HOLD              LAST EVENT
        > done   make test      exit 2     - -                 exited with code 2 (1 s ~
          shell  sh -i          running    0 -                 spawned (1 min ago)
          worker agent-cli --r~ idle       2 composer-nonempty activity: idle, composer~
        j/k select  enter attach  p peek  d ding  / filter  R restart  K kill  q quit
        ");
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 60, 6);
        insta::assert_snapshot!(text(&lines), @r"
        belfry top  3 pane(s), 2 unread message(s), 1 held  14:02:11
          NAME   STATE   UNRD LAST EVENT
        > done   exit 2     - exited with code 2 (1 s ago)
          shell  running    0 spawned (1 min ago)
          worker idle       2 activity: idle, composer nonempty, re~
        j/k select  enter attach  p peek  d ding  / filter  R restar
        ");
        // Narrower than the columns never left out: the line is cut.
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 30, 3);
        assert!(lines.iter().all(|line| line.text.chars().count() == 30));
        assert_eq!(lines[1].text.trim_end(), "  NAME   STATE   LAST EVENT");
    }

    #[test]
    fn a_filter_lists_only_the_names_holding_it_and_selects_among_them() {
        let fleet = fleet();
        let mut ui = Ui::default();
        for key in b"/ELL".iter().skip(1) {
            ui.filter_key(ViewKey::Byte(*key));
        }
        ui.typing = true;
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 80, 5);
        insta::assert_snapshot!(text(&lines), @r"
        belfry top  3 pane(s), 2 unread message(s), 1 held  14:02:11
          NAME  PROGRAM STATE   REV UNRD HELD STGD HOLD   AGE LAST EVENT
        > shell sh -i   running   7    0    0    0 -    2 min spawned (1 min ago)

        /ELL  (enter keeps the filter, escape drops it)  1 of 3 pane(s)
        ");
        assert_eq!(ui.selected.as_deref(), Some("shell"));
        ui.move_selection(&fleet, 1);
        assert_eq!(
            ui.selected.as_deref(),
            Some("shell"),
            "moved to a pane not listed"
        );
        // Enter keeps it; a pasted `r` and a pasted line break (dropped) narrow it to none.
        ui.filter_key(ViewKey::Byte(b'\r'));
        assert!(!ui.typing);
        ui.filter_key(ViewKey::Pasted(b'r'));
        ui.filter_key(ViewKey::Pasted(b'\n'));
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 80, 4);
        assert_eq!(
            lines[2].text.trim_end(),
            "  no pane's name holds \"ELLr\" (Escape shows them all)"
        );
        assert!(lines[3]
            .text
            .starts_with("filter \"ELLr\": 0 of 3 pane(s)  |  j/k select"));
        assert_eq!(ui.selected, None);
        // Escape while typing drops the filter: every pane again.
        ui.typing = true;
        ui.filter_key(ViewKey::Byte(0x1b));
        assert_eq!((ui.typing, ui.filter.as_str()), (false, ""));
        assert_eq!(ui.shown(&fleet).len(), 3);
    }

    #[test]
    fn a_kill_or_restart_asks_on_the_last_line_first() {
        let fleet = fleet();
        let mut ui = Ui {
            confirm: Some((Confirm::Kill, "worker".into())),
            ..Ui::default()
        };
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 120, 6);
        assert_eq!(
            lines[5].text.trim_end(),
            "kill worker, its program and its pane host? y kills it, any other key keeps it"
        );
        ui.confirm = Some((Confirm::Restart, "shell".into()));
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 120, 6);
        assert_eq!(
            lines[5].text.trim_end(),
            "restart shell's program? y restarts it, any other key keeps it running"
        );
        assert_eq!(
            Confirm::Kill.question("watch", true),
            "kill watch (this view's own pane), its program and its pane host? y kills it, any \
             other key keeps it"
        );
    }

    /// A program status record in `state` (with `kind` when blocked), entered `ago_ms` before
    /// [`NOW`].
    fn status(state: ProgramState, kind: Option<BlockedKind>, ago_ms: u64) -> Option<StatusRecord> {
        Some(StatusRecord {
            id: None,
            state,
            kind,
            app: Some("agent".into()),
            msg: None,
            title: None,
            progress: None,
            revision: 5,
            since: NOW - ago_ms,
            incarnation: "i".into(),
        })
    }

    /// The panes whose programs report they wait for a person come first, the one waiting
    /// longest first, each with what it waits for and since how long; then the one at work,
    /// then the idle one, then the panes that report nothing, in name order.
    #[test]
    fn the_panes_that_need_a_person_come_first_with_what_they_wait_for_and_how_long() {
        let mut fleet = Fleet::default();
        let with = |name: &str, record: Option<StatusRecord>| {
            let mut pane = pane(name, &["agent"], 9, 0);
            pane.program_status = record;
            pane
        };
        fleet.update_listing(
            vec![
                with("a-idle", status(ProgramState::Idle, None, 40_000)),
                with("b-plain", None),
                with(
                    "c-asks",
                    status(ProgramState::Blocked, Some(BlockedKind::Question), 5_000),
                ),
                with("d-working", status(ProgramState::Working, None, 12_000)),
                with(
                    "e-approve",
                    status(
                        ProgramState::Blocked,
                        Some(BlockedKind::Permission),
                        200_000,
                    ),
                ),
            ],
            NOW,
        );
        let mut ui = Ui::default();
        let names: Vec<&str> = ui
            .shown(&fleet)
            .iter()
            .map(|pane| pane.record.session.as_str())
            .collect();
        assert_eq!(
            names,
            ["e-approve", "c-asks", "d-working", "a-idle", "b-plain"]
        );
        let lines = frame(&fleet, &mut ui, NOW, "14:02:11", 80, 8);
        insta::assert_snapshot!(text(&lines), @r"
        belfry top  5 pane(s), 0 unread message(s), 0 held  14:02:11
          NAME      STATE                       UNRD HOLD LAST EVENT
        > e-approve needs you: permission 3 min    - -    -
          c-asks    needs you: question 5 s        - -    -
          d-working working 12 s                   - -    -
          a-idle    idle 40 s                      - -    -
          b-plain   running                        - -    -
        j/k select  enter attach  p peek  d ding  / filter  R restart  K kill  q quit
        ");
        // The selection starts on the pane that waits longest for a person.
        assert_eq!(ui.selected.as_deref(), Some("e-approve"));
    }

    #[test]
    fn a_narrow_terminal_cuts_lines_and_no_panes_says_how_to_start_one() {
        let mut ui = Ui::default();
        let lines = frame(&Fleet::default(), &mut ui, NOW, "14:02:11", 20, 4);
        assert!(lines.iter().all(|line| line.text.chars().count() == 20));
        assert_eq!(lines[2].text, "  no panes (belfry n");
    }
}
