//! Keeps the slices of one (pid, tid) track strictly nested, as the Perfetto UI and speedscope
//! require, while emitting each slice as soon as it closes.
//!
//! A region's slice is `[leave − t_rel, leave]` (binary-format.md §11). The wall time of a line is
//! read a little after its elapsed time, so these bounds can stick out of the enclosing region, or
//! into the previous sibling, by a few µs. Each open slice therefore remembers a *floor* (the end
//! of every slice closed before it opened: it may not start earlier) and the extent of its
//! children (it must cover them): a slice is moved at most by that jitter, and nesting holds by
//! construction. Damaged input (a leave without its enter, an enter at a level that is still open)
//! is closed or placed so that nesting still holds; what cannot be placed is handed back for a
//! separate track.

/// A slice that closed: its bounds in µs and what it carries.
#[derive(Debug, PartialEq)]
pub struct Closed<T> {
    /// Start, µs.
    pub start: i64,
    /// End, µs (≥ start).
    pub end: i64,
    /// The caller's data given when it opened.
    pub payload: T,
    /// It never saw its end (closed at a later enter, a leave further out, or the end of input).
    pub incomplete: bool,
}

struct Open<T> {
    /// 0 for the track's base slice (process or thread lifetime), else the region's `nesting`.
    nesting: i64,
    /// Start by its own line (the enter's time, no earlier than `floor`).
    start: i64,
    floor: i64,
    min_child_start: i64,
    max_child_end: i64,
    payload: T,
}

/// The open slices of one track.
pub struct Track<T> {
    stack: Vec<Open<T>>,
    /// End of the latest slice closed on this track.
    max_closed_end: i64,
}

impl<T> Default for Track<T> {
    fn default() -> Self {
        Track {
            stack: Vec::new(),
            max_closed_end: i64::MIN,
        }
    }
}

impl<T> Track<T> {
    /// Opens the track's base slice (the process or thread lifetime) at `at`.
    pub fn open_base(&mut self, at: i64, payload: T, emit: &mut impl FnMut(Closed<T>)) {
        self.unwind_to(0, at, emit);
        self.push(0, at, payload);
    }

    /// Opens a region at `at`. Open regions at the same level or deeper were never left: they are
    /// closed here first.
    pub fn open(&mut self, nesting: i64, at: i64, payload: T, emit: &mut impl FnMut(Closed<T>)) {
        let nesting = nesting.max(1);
        self.unwind_to(nesting, at, emit);
        self.push(nesting, at, payload);
    }

    fn push(&mut self, nesting: i64, at: i64, payload: T) {
        let floor = self.max_closed_end;
        let start = at.max(floor);
        self.stack.push(Open {
            nesting,
            start,
            floor,
            min_child_start: i64::MAX,
            max_child_end: i64::MIN,
            payload,
        });
    }

    /// Closes, as incomplete at `at`, every open slice at level `nesting` or deeper.
    fn unwind_to(&mut self, nesting: i64, at: i64, emit: &mut impl FnMut(Closed<T>)) {
        while self
            .stack
            .last()
            .is_some_and(|open| open.nesting >= nesting)
        {
            self.close_top(at, None, true, emit);
        }
    }

    /// True when a region of this `nesting` is open.
    pub fn is_open(&self, nesting: i64) -> bool {
        let nesting = nesting.max(1);
        self.stack.iter().any(|open| open.nesting == nesting)
    }

    /// Closes the open region of level `nesting` at `at`, having lasted `duration` µs; regions open
    /// inside it are closed first, as incomplete. Returns false (and closes nothing) when no
    /// region of that level is open.
    pub fn close(
        &mut self,
        nesting: i64,
        at: i64,
        duration: i64,
        emit: &mut impl FnMut(Closed<T>),
    ) -> bool {
        let nesting = nesting.max(1);
        if !self.is_open(nesting) {
            return false;
        }
        self.unwind_to(nesting + 1, at, emit);
        self.close_top(at, Some(duration), false, emit);
        true
    }

    /// Closes the base slice at `at` (a thread's exit), with everything still open in it.
    pub fn close_base(&mut self, at: i64, duration: i64, emit: &mut impl FnMut(Closed<T>)) -> bool {
        if !self.stack.iter().any(|open| open.nesting == 0) {
            return false;
        }
        self.unwind_to(1, at, emit);
        self.close_top(at, Some(duration), false, emit);
        true
    }

    /// Closes everything at `at` (end of input): regions as incomplete, the base as complete when
    /// `base_complete`.
    pub fn close_all(&mut self, at: i64, base_complete: bool, emit: &mut impl FnMut(Closed<T>)) {
        self.unwind_to(1, at, emit);
        if !self.stack.is_empty() {
            self.close_top(at, None, !base_complete, emit);
        }
    }

    /// Places a slice that was never opened (a leave without its enter) as a leaf, if it fits
    /// after everything closed so far. Returns its bounds, or `None` when it would overlap.
    pub fn place(&mut self, start: i64, end: i64) -> Option<(i64, i64)> {
        if start < self.max_closed_end {
            return None;
        }
        let end = end.max(start);
        self.closed(start, end);
        Some((start, end))
    }

    fn close_top(
        &mut self,
        at: i64,
        duration: Option<i64>,
        incomplete: bool,
        emit: &mut impl FnMut(Closed<T>),
    ) {
        let Some(open) = self.stack.pop() else { return };
        let start = match duration {
            Some(duration) => at.saturating_sub(duration).max(open.floor),
            None => open.start,
        }
        .min(open.min_child_start);
        let end = at.max(open.max_child_end).max(start);
        self.closed(start, end);
        emit(Closed {
            start,
            end,
            payload: open.payload,
            incomplete,
        });
    }

    fn closed(&mut self, start: i64, end: i64) {
        self.max_closed_end = self.max_closed_end.max(end);
        if let Some(outer) = self.stack.last_mut() {
            outer.min_child_start = outer.min_child_start.min(start);
            outer.max_child_end = outer.max_child_end.max(end);
        }
    }

    /// Moves the base slice's start earlier, to `start` (the process's clock zero, learnt after
    /// its first line).
    pub fn lower_base_start(&mut self, start: i64) {
        if let Some(base) = self.stack.first_mut().filter(|open| open.nesting == 0) {
            base.start = base.start.min(start);
        }
    }

    /// The payload of the slice opened last and still open.
    pub fn top_payload(&self) -> Option<&T> {
        self.stack.last().map(|open| &open.payload)
    }

    /// True when nothing is open.
    pub fn is_empty(&self) -> bool {
        self.stack.is_empty()
    }

    /// The payload of the base slice, if open.
    pub fn base_payload(&mut self) -> Option<&mut T> {
        self.stack
            .first_mut()
            .filter(|open| open.nesting == 0)
            .map(|open| &mut open.payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks strict nesting of a set of slices the way a viewer does: sorted by start (longer
    /// first), each slice inside the one open on a stack.
    fn nests(mut slices: Vec<(i64, i64)>) -> Result<(), String> {
        slices.sort_by_key(|&(s, e)| (s, -e));
        let mut stack: Vec<(i64, i64)> = Vec::new();
        for (s, e) in slices {
            while stack.last().is_some_and(|&(_, top_end)| top_end <= s) {
                stack.pop();
            }
            if let Some(&(ts, te)) = stack.last()
                && e > te
            {
                return Err(format!("[{s},{e}] overlaps [{ts},{te}]"));
            }
            stack.push((s, e));
        }
        Ok(())
    }

    #[test]
    fn jitter_is_absorbed() {
        // Outer entered at 100, inner at 101 but its wall time was read late, so leave − t_rel
        // lands before the outer's start; the next sibling would start inside the first.
        let mut track = Track::default();
        let mut out = Vec::new();
        let mut emit = |c: Closed<&'static str>| out.push((c.payload, c.start, c.end));
        track.open_base(90, "process", &mut emit);
        track.open(1, 100, "outer", &mut emit);
        track.open(2, 101, "inner", &mut emit);
        assert!(track.close(2, 110, 12, &mut emit)); // starts at 98 < outer's 100
        track.open(2, 111, "sibling", &mut emit);
        assert!(track.close(2, 120, 11, &mut emit)); // starts at 109 < inner's end 110
        assert!(track.close(1, 119, 19, &mut emit)); // ends before its child ends
        track.close_all(130, true, &mut emit);
        assert_eq!(
            out,
            [
                ("inner", 98, 110),
                ("sibling", 110, 120),
                ("outer", 98, 120),
                ("process", 90, 130)
            ]
        );
        nests(out.iter().map(|&(_, s, e)| (s, e)).collect()).unwrap();
    }

    #[test]
    fn damaged_streams_still_nest() {
        let mut t = Track::default();
        let mut out = Vec::new();
        let mut emit = |c: Closed<&'static str>| out.push((c.start, c.end));
        t.open_base(0, "p", &mut emit);
        t.open(1, 10, "a", &mut emit);
        t.open(2, 20, "lost leave", &mut emit);
        // A second level-2 enter: the first one's leave is missing.
        t.open(2, 30, "b", &mut emit);
        assert!(t.close(2, 40, 10, &mut emit));
        // A leave of level 3 with no enter: nothing to close.
        assert!(!t.close(3, 45, 5, &mut emit));
        // It fits after everything closed: placed as a leaf.
        assert_eq!(t.place(41, 45), Some((41, 45)));
        // One that overlaps what is closed does not fit.
        assert_eq!(t.place(35, 50), None);
        // Leaving level 1 closes what is open inside it.
        t.open(2, 46, "open inside", &mut emit);
        assert!(t.close(1, 60, 50, &mut emit));
        t.open(1, 70, "never left", &mut emit);
        t.close_all(80, false, &mut emit);
        assert_eq!(out.len(), 6);
        nests(out).unwrap();
    }

    #[test]
    fn the_checker_catches_overlap() {
        assert!(nests(vec![(0, 10), (5, 15)]).is_err());
        assert!(nests(vec![(0, 10), (0, 10), (2, 3), (10, 12)]).is_ok());
    }
}
