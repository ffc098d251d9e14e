//! The model of the hit path: loom runs each scenario over every interleaving (up to a bound
//! on preemptions) and every outcome its weak memory model allows. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p tiercache-engine --lib --release model`.

use super::*;
use loom::sync::Mutex;

const SLOT_BYTES: usize = 16;

/// A table of two 16-byte slots without headers (a DRAM tier's), and its memory.
fn table() -> (SlotTable, SlotMemory) {
    let sets = Sets::new(1, 2).unwrap();
    let memory = SlotMemory { words: (0..4).map(|_| AtomicU64::new(0)).collect() };
    let layout = SlotLayout { slots_at: 0, slots: 2, slot_bytes: SLOT_BYTES, headers_at: None };
    (SlotTable::new((&sets, 0), memory.clone(), layout), memory)
}

fn model(scenario: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(scenario);
}

/// The lock holder's write of `key`'s `value` into `slot`, as `Region::write` does it.
fn write(table: &SlotTable, memory: &SlotMemory, slot: u32, key: Key, value: u8) {
    let way = table.begin_write(slot, key);
    memory.store(slot as usize * SLOT_BYTES, &[value; SLOT_BYTES]);
    table.end_write(way, slot, key, SLOT_BYTES);
}

/// A read without the lock: a whole value (one of `allowed`), or nothing, with `out`
/// untouched when landing `Checked`.
fn read_landing(table: &SlotTable, key: Key, allowed: &[u8], landing: Landing) {
    let mut out = [0xEEu8; SLOT_BYTES];
    match table.read(key, &mut out, landing) {
        Some((len, _)) => {
            assert_eq!(len, SLOT_BYTES);
            assert!(
                allowed.iter().any(|&v| out == [v; SLOT_BYTES]),
                "key {key} read {out:?}, not one of its values {allowed:?}"
            );
        }
        None if landing == Landing::Checked => {
            assert_eq!(out, [0xEE; SLOT_BYTES], "a failed read wrote the buffer")
        }
        None => {}
    }
}

fn read_checked(table: &SlotTable, key: Key, allowed: &[u8]) {
    read_landing(table, key, allowed, Landing::Checked)
}

/// A read landing as `landing` races an overwrite in place of the block it reads: it gets
/// the old value or the new one whole, or nothing, and after the writer ends, the new one.
fn read_racing_an_overwrite(landing: Landing) {
    model(move || {
        let (table, memory) = table();
        write(&table, &memory, 0, 7, 1);
        let (t, m) = (table.clone(), memory.clone());
        let writer = loom::thread::spawn(move || write(&t, &m, 0, 7, 2));
        read_landing(&table, 7, &[1, 2], landing);
        writer.join().unwrap();
        read_landing(&table, 7, &[2], landing);
    });
}

#[test]
fn an_overwrite_in_place_is_read_whole_or_not_at_all() {
    read_racing_an_overwrite(Landing::Checked);
}

#[test]
fn a_direct_read_is_whole_or_refused() {
    read_racing_an_overwrite(Landing::Direct);
}

/// A mapped tier's table: two headers, then two slots of a 16-byte value.
fn mapped_table() -> (SlotTable, SlotMemory) {
    let sets = Sets::new(1, 2).unwrap();
    let words = 2 * (HEADER_BYTES + SLOT_BYTES) / 8;
    let memory = SlotMemory { words: (0..words).map(|_| AtomicU64::new(0)).collect() };
    let layout = SlotLayout {
        slots_at: 2 * HEADER_BYTES,
        slots: 2,
        slot_bytes: SLOT_BYTES,
        headers_at: Some(0),
    };
    (SlotTable::new((&sets, 0), memory.clone(), layout), memory)
}

/// The lock holder's write of a block into mapped slot 0, value then header, as
/// `Region::write` does it; `rotten` flips a bit of the value after the checksum was taken.
fn write_block(table: &SlotTable, memory: &SlotMemory, key: Key, value: u8, rotten: bool) {
    let mut value = [value; SLOT_BYTES];
    let header = block::header(key, &value, block::Stamp::default());
    if rotten {
        value[0] ^= 1;
    }
    let way = table.begin_write(0, key);
    memory.store(2 * HEADER_BYTES, &value);
    memory.store(0, &header);
    table.end_write(way, 0, key, SLOT_BYTES);
}

#[test]
fn a_checked_mark_never_outlives_a_rewrite() {
    model(|| {
        let (table, memory) = mapped_table();
        write_block(&table, &memory, 7, 1, false);
        // A hit checks the block and marks it, racing a rewrite with a bad block.
        let (t, m) = (table.clone(), memory.clone());
        let writer = loom::thread::spawn(move || write_block(&t, &m, 7, 2, true));
        let mut out = [0u8; SLOT_BYTES];
        if let Some((len, _)) = table.read(7, &mut out, Landing::Checked) {
            assert_eq!((len, out), (SLOT_BYTES, [1; SLOT_BYTES]), "only the good block");
        }
        writer.join().unwrap();
        // Whatever the hit marked, the rewritten block is checked, and refused.
        assert_eq!(table.read(7, &mut out, Landing::Checked), None);
    });
}

/// The hit rule's stamp: a hit told in this epoch stamps the way, and the next hit is not
/// told; a rewrite racing the stamping leaves the block unstamped, so the first hit after
/// it is told (the policy clears its stamp on a write too).
#[test]
fn a_hits_stamp_never_outlives_a_rewrite() {
    model(|| {
        let (table, memory) = table();
        table.set_tag(5);
        write(&table, &memory, 0, 7, 1);
        let (t, m) = (table.clone(), memory.clone());
        let writer = loom::thread::spawn(move || write(&t, &m, 0, 7, 2));
        let mut out = [0u8; SLOT_BYTES];
        let first = table.read(7, &mut out, Landing::Checked);
        let first_saw_the_rewrite = first.is_some() && out == [2; SLOT_BYTES];
        writer.join().unwrap();
        let (_, told) = table.read(7, &mut out, Landing::Checked).expect("settled");
        assert_eq!(out, [2; SLOT_BYTES]);
        // Told unless the first hit read the rewritten block and stamped it.
        assert!(told || first_saw_the_rewrite, "a stamp outlived the rewrite");
        let (_, again) = table.read(7, &mut out, Landing::Checked).expect("settled");
        assert!(!again, "a hit stamped in this epoch is told again");
    });
}

/// Two keys of one set, so that the way `a` leaves is the one `b` takes.
fn same_set_keys(table: &SlotTable) -> (Key, Key) {
    let a = 1;
    let set = table.set_of(a);
    let b = (2..).find(|&k| std::ptr::eq(table.set_of(k), set)).unwrap();
    (a, b)
}

#[test]
fn a_reader_never_takes_a_block_of_another_key() {
    model(|| {
        let (table, memory) = table();
        let (a, b) = same_set_keys(&table);
        let c = b + 1_000_003;
        write(&table, &memory, 0, a, 1);
        // The lock holder: `a` leaves slot 0; `b` is written to slot 1 (its way is the one
        // `a` left); `c` is written to slot 0.
        let (t, m) = (table.clone(), memory.clone());
        let writer = loom::thread::spawn(move || {
            t.vacate(0, a);
            write(&t, &m, 1, b, 2);
            write(&t, &m, 0, c, 3);
        });
        let t = table.clone();
        let reader = loom::thread::spawn(move || read_checked(&t, b, &[2]));
        read_checked(&table, a, &[1]);
        writer.join().unwrap();
        reader.join().unwrap();
    });
}

#[test]
fn every_hit_recorded_is_told_once_in_order() {
    model(|| {
        let log = std::sync::Arc::new(HitLog::new(1));
        let told = std::sync::Arc::new(Mutex::new(Vec::new()));
        // The shard's lock holder: takes whatever is flagged.
        let (l, t) = (log.clone(), told.clone());
        let holder = loom::thread::spawn(move || {
            let mut told = t.lock().unwrap();
            l.take(0, false, |hits| told.extend(hits.iter().map(|h| h.key)));
        });
        // A thread hitting: on a full ring it commits its own ring (and those flagged)
        // under the lock first.
        for key in 1..=3 {
            let hit = Hit { key, len: 0, ns: 0 };
            loop {
                match log.record(0, hit) {
                    Recorded::Yes => break,
                    Recorded::Full => {
                        let mut told = told.lock().unwrap();
                        log.take(0, false, |hits| told.extend(hits.iter().map(|h| h.key)));
                    }
                    Recorded::NoStripe => unreachable!("a model thread has a stripe"),
                }
            }
        }
        holder.join().unwrap();
        // The hitting thread's next locked request: every hit of its own is told first,
        // also one that went unflagged while it raced the holder.
        let mut told = told.lock().unwrap();
        log.take(0, false, |hits| told.extend(hits.iter().map(|h| h.key)));
        assert_eq!(*told, vec![1, 2, 3]);
    });
}
