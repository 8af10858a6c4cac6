//! A scenario file's `[[feeder]]`: its data file read into the rows the engine picks from. CSV
//! with a header row (RFC 4180 quoting, any bytes in a cell), or JSON lines of flat objects (the
//! first line's keys are the columns; strings as they are, other values as JSON writes them).
//! The file is read as it streams, into one table: the controller holds one copy.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use volley_engine::{MAX_COLUMNS, Table, TableError, is_feeder_name};

/// A feeder file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Csv,
    JsonLines,
}

impl Format {
    /// `csv` or `jsonl`; None for anything else.
    pub(super) fn parse(name: &str) -> Option<Format> {
        match name {
            "csv" => Some(Format::Csv),
            "jsonl" | "ndjson" => Some(Format::JsonLines),
            _ => None,
        }
    }

    /// By the file's extension (`.csv`, `.jsonl`, `.ndjson`).
    pub(super) fn of_path(path: &Path) -> Option<Format> {
        Format::parse(&path.extension()?.to_str()?.to_ascii_lowercase())
    }
}

/// Why a feeder file cannot be used: what, and on which line of it (0: the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FeederProblem {
    pub line: u64,
    pub what: String,
}

fn problem(line: u64, what: impl Into<String>) -> FeederProblem {
    FeederProblem { line, what: what.into() }
}

/// The columns and rows of the file at `path`, within `limit` bytes of cells.
pub(super) fn read(path: &Path, format: Format, limit: u64) -> Result<(Vec<String>, Table), FeederProblem> {
    let file = File::open(path).map_err(|e| problem(0, e.to_string()))?;
    // The cells are fewer bytes than the file: room for them all at once, so that the table
    // never grows by doubling (which held the old and the new copy at once: twice the data at
    // its peak). Pages never written are never resident.
    let room = file.metadata().map_or(0, |m| m.len()).min(limit);
    let (columns, table) = match format {
        Format::Csv => read_csv(BufReader::with_capacity(1 << 16, file), limit, room)?,
        Format::JsonLines => read_json_lines(BufReader::with_capacity(1 << 16, file), limit, room)?,
    };
    if table.rows() == 0 {
        return Err(problem(0, "it has no rows (only a header, or nothing)"));
    }
    Ok((columns, table))
}

fn too_large(line: u64, limit: u64) -> FeederProblem {
    problem(line, format!("the run's feeders hold more than {limit} bytes of data, the most --max-feeder-bytes allows"))
}

fn check_columns(columns: &[String]) -> Result<(), FeederProblem> {
    if columns.len() > MAX_COLUMNS {
        return Err(problem(1, format!("{} columns is more than the {MAX_COLUMNS} a feeder may have", columns.len())));
    }
    for (i, c) in columns.iter().enumerate() {
        if !is_feeder_name(c) {
            return Err(problem(
                1,
                format!("column `{}`: a column's name is letters, digits, `_` and `-`", c.escape_debug()),
            ));
        }
        if columns[..i].contains(c) {
            return Err(problem(1, format!("two columns are named `{c}`")));
        }
    }
    Ok(())
}

fn read_csv(input: impl std::io::Read, limit: u64, room: u64) -> Result<(Vec<String>, Table), FeederProblem> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).flexible(false).from_reader(input);
    let line_of = |e: &csv::Error| e.position().map_or(0, |p| p.line());
    let header = reader.byte_headers().map_err(|e| problem(line_of(&e), csv_error(&e)))?.clone();
    let columns: Vec<String> = header.iter().map(|c| String::from_utf8_lossy(c).trim().to_string()).collect();
    if columns.iter().all(String::is_empty) {
        return Err(problem(1, "no header row: the first line names the columns"));
    }
    check_columns(&columns)?;
    let mut table = Table::new(columns.len());
    table.reserve(0, room as usize);
    let mut record = csv::ByteRecord::new();
    loop {
        match reader.read_byte_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {
                let line = record.position().map_or(0, |p| p.line());
                let cells: Vec<&[u8]> = record.iter().collect();
                table.push(&cells, limit).map_err(|e| match e {
                    TableError::TooLarge { .. } => too_large(line, limit),
                    e => problem(line, e.to_string()),
                })?;
            }
            Err(e) => return Err(problem(line_of(&e), csv_error(&e))),
        }
    }
    Ok((columns, table))
}

fn csv_error(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            format!("a row of {len} fields where the header has {expected_len}")
        }
        csv::ErrorKind::Io(e) => e.to_string(),
        _ => e.to_string(),
    }
}

fn read_json_lines(mut input: impl BufRead, limit: u64, room: u64) -> Result<(Vec<String>, Table), FeederProblem> {
    let mut columns: Vec<String> = Vec::new();
    let mut table = Table::new(0);
    let (mut line, mut number) = (Vec::new(), 0u64);
    loop {
        line.clear();
        number += 1;
        match input.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(problem(number, e.to_string())),
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&line)
            .map_err(|e| problem(number, format!("not a JSON object: {}", e.to_string().replace('\n', " "))))?;
        if columns.is_empty() {
            columns = object.keys().cloned().collect();
            if columns.is_empty() {
                return Err(problem(number, "an empty object: the first line's keys are the columns"));
            }
            check_columns(&columns)?;
            table = Table::new(columns.len());
            table.reserve(0, room as usize);
        }
        if let Some(extra) = object.keys().find(|k| !columns.contains(k)) {
            return Err(problem(number, format!("key `{extra}`, which the first line does not have")));
        }
        // A string's bytes go in as they are, borrowed: only other values are written anew.
        let mut cells: Vec<Cow<'_, [u8]>> = Vec::with_capacity(columns.len());
        for column in &columns {
            let Some(value) = object.get(column) else {
                return Err(problem(number, format!("no `{column}`, which the first line has")));
            };
            cells.push(match value {
                serde_json::Value::String(s) => Cow::Borrowed(s.as_bytes()),
                serde_json::Value::Null => Cow::Borrowed(&[]),
                other => Cow::Owned(other.to_string().into_bytes()),
            });
        }
        table.push(&cells, limit).map_err(|e| match e {
            TableError::TooLarge { .. } => too_large(number, limit),
            e => problem(number, e.to_string()),
        })?;
    }
    Ok((columns, table))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(text: &str) -> Result<(Vec<String>, Table), FeederProblem> {
        read_csv(text.as_bytes(), u64::MAX, 0)
    }

    #[test]
    fn csv_rows_keep_quoted_commas_and_line_breaks_and_every_byte() {
        let (columns, table) = csv("id,email\n1,\"a,b@x\"\n2,\"two\nlines\"\n3,caf\u{e9}\n").expect("valid");
        assert_eq!(columns, ["id", "email"]);
        assert_eq!(table.rows(), 3);
        assert_eq!(table.cell(0, 1), b"a,b@x");
        assert_eq!(table.cell(1, 1), b"two\nlines");
        assert_eq!(table.cell(2, 1), "caf\u{e9}".as_bytes());
    }

    #[test]
    fn a_short_row_a_bad_column_name_or_too_much_data_is_an_error_on_its_line() {
        assert_eq!(csv("id,email\n1,a\n2\n").expect_err("short").line, 3);
        assert!(csv("id,email\n1,a\n2\n").expect_err("short").what.contains("1 fields where the header has 2"));
        assert!(csv("id,id\n1,2\n").expect_err("twice").what.contains("two columns"));
        assert!(csv("id,e mail\n1,2\n").expect_err("blank").what.contains("letters, digits"));
        let e = read_csv("id\n1234\n5678\n".as_bytes(), 6, 0).expect_err("over 6 bytes");
        assert_eq!(e.line, 3);
        assert!(e.what.contains("--max-feeder-bytes"), "{}", e.what);
    }

    #[test]
    fn json_lines_take_the_first_lines_keys_as_columns_and_values_as_json_writes_them() {
        let text = "{\"id\": 1, \"name\": \"ann\", \"tags\": [1,2]}\n\n{\"id\": 2.5, \"name\": null, \"tags\": {}}\n";
        let (columns, table) = read_json_lines(text.as_bytes(), u64::MAX, 0).expect("valid");
        assert_eq!(columns, ["id", "name", "tags"]);
        assert_eq!(table.rows(), 2);
        assert_eq!((table.cell(0, 0), table.cell(0, 1), table.cell(0, 2)), (&b"1"[..], &b"ann"[..], &b"[1,2]"[..]));
        assert_eq!((table.cell(1, 0), table.cell(1, 1)), (&b"2.5"[..], &b""[..]));
        let missing = read_json_lines("{\"a\":1,\"b\":2}\n{\"a\":3}\n".as_bytes(), u64::MAX, 0).expect_err("no b");
        assert_eq!((missing.line, missing.what.as_str()), (2, "no `b`, which the first line has"));
        let bad = read_json_lines("{\"a\":1}\n[1]\n".as_bytes(), u64::MAX, 0).expect_err("not an object");
        assert_eq!(bad.line, 2);
    }
}
