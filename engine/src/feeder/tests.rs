use std::sync::Arc;

use super::*;

fn table(rows: usize) -> Table {
    let mut t = Table::new(2);
    for i in 0..rows {
        t.push(&[format!("id{i}"), format!("user{i}@x")], u64::MAX).expect("fits");
    }
    t
}

#[test]
fn a_table_gives_back_each_cell_and_rows_travel_in_slices_that_rebuild_it() {
    let t = table(5);
    assert_eq!((t.rows(), t.width()), (5, 2));
    assert_eq!(t.cell(3, 1), b"user3@x");
    assert_eq!(t.cell(0, 0), b"id0");
    assert_eq!(t.cell(9, 0), b"", "out of range is empty, never a panic");
    let mut rebuilt = Table::new(2);
    for rows in [0..2, 2..5] {
        let (data, lengths) = t.slice(rows);
        let lengths: Vec<u32> = lengths.collect();
        rebuilt.extend(data, &lengths, u64::MAX).expect("fits");
    }
    assert_eq!(rebuilt, t);
}

#[test]
fn a_row_of_the_wrong_width_or_past_the_limit_is_refused() {
    let mut t = Table::new(2);
    assert_eq!(t.push(&["only one"], 100), Err(TableError::Width { want: 2, got: 1 }));
    t.push(&["abc", "de"], 10).expect("5 bytes fit in 10");
    assert_eq!(t.push(&["abc", "def"], 10), Err(TableError::TooLarge { limit: 10 }));
    assert_eq!(t.rows(), 1, "a refused row leaves nothing behind");
    assert!(matches!(t.extend(b"abc", &[1, 1], 100), Err(TableError::Lengths { .. })));
}

fn feeds(mode: FeederMode, rows: std::ops::Range<usize>) -> Feeds {
    let mut f = Feeder::new("users".into(), vec!["id".into(), "email".into()], mode, Arc::new(table(10)));
    f.rows = rows;
    Feeds::new(&[f], 7, 0)
}

#[test]
fn shard_takes_each_of_its_rows_once_and_then_runs_out() {
    let mut f = feeds(FeederMode::Shard, 3..6);
    let mut rows = [NO_ROW];
    let mut taken = Vec::new();
    while f.has_rows(1) {
        assert_eq!(f.take(1, 0, 0, &mut rows), RowPick::Taken(1));
        taken.push(rows[0]);
    }
    assert_eq!(taken, [3, 4, 5]);
    assert_eq!(f.take(1, 0, 0, &mut rows), RowPick::RanOut);
    assert!(f.has_rows(0), "an iteration that uses no feeder never runs out");
    assert_eq!(f.cell(0, 4, 1), b"user4@x");
    assert_eq!(f.cell(0, NO_ROW, 1), b"");
}

#[test]
fn cycle_walks_the_rows_from_each_users_own_and_random_draws_the_same_rows_for_the_same_seed() {
    let mut f = feeds(FeederMode::Cycle, 0..10);
    let mut rows = [NO_ROW];
    let walked: Vec<u32> = (0..12)
        .map(|i| {
            f.take(1, 8, i, &mut rows);
            rows[0]
        })
        .collect();
    assert_eq!(walked, [8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let draw = |seed| {
        let mut rows = [NO_ROW];
        let mut f = Feeds::new(
            &[Feeder::new("u".into(), vec!["a".into(), "b".into()], FeederMode::Random, Arc::new(table(10)))],
            seed,
            0,
        );
        (0..2000)
            .map(|_| {
                f.take(1, 0, 0, &mut rows);
                rows[0]
            })
            .collect::<Vec<u32>>()
    };
    let a = draw(1);
    assert_eq!(a, draw(1));
    assert_ne!(a, draw(2));
    for row in 0..10 {
        let n = a.iter().filter(|&&r| r == row).count();
        // 200 expected; the binomial's standard deviation is about 13.
        assert!((130..=270).contains(&n), "row {row}: {n}");
    }
}
