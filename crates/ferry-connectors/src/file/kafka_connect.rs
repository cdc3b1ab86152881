//! Positions written by Kafka Connect's own FileStreamSource.
//!
//! Kafka Connect's `FileStreamSourceTask` counts its `position` in Java `char`s (UTF-16 code units) of
//! the text it decoded, but resumes by skipping that many *bytes*. On ASCII text the two agree; after
//! a line with multi-byte UTF-8 they do not, and Kafka Connect itself resumes in the middle of a line
//! (checked against Kafka Connect 4.4: after `a\nb\nçé€\n` it commits position 8, the file has 12
//! bytes). Ferry counts bytes and writes the file's identity beside them, so an offset without that
//! identity came from Kafka Connect: Ferry reads its position as Kafka Connect meant it, code units
//! from the start of the file, and converts it to bytes, so a connector moved from Kafka Connect
//! continues exactly after Kafka Connect's last committed line.
//!
//! The conversion is trusted only when it lands right after a line terminator, as every position
//! Kafka Connect commits does when its task read the file from the start. A position from a Kafka
//! Connect task that had itself resumed part-way (bytes skipped, then code units counted) lands
//! elsewhere; the position is then taken as bytes, as before, with a warning.

use std::io::{BufReader, Read};
use std::path::Path;

/// Reads at most this many bytes to convert one position (a bound on the start-up work: 1 GiB of
/// text; a longer file keeps the position as bytes, with a warning).
const MAX_SCAN: u64 = 1 << 30;

/// The byte position of Kafka Connect's `position` (code units) in the file at `path`, or `position`
/// itself when the file is missing, ASCII up to there, or the conversion does not land after a line
/// terminator.
pub(crate) fn byte_position(path: &Path, position: u64) -> u64 {
    match scan(path, position) {
        Ok(Scan::Converted(bytes)) if bytes != position => {
            tracing::info!(
                file = %path.display(),
                kafka_connect_position = position,
                byte_position = bytes,
                "FileStreamSource: an offset written by Kafka Connect counts UTF-16 code units; \
                 resuming at the byte right after the same line"
            );
            bytes
        }
        Ok(Scan::Converted(bytes)) => bytes,
        Ok(Scan::NotAtLineStart) => {
            tracing::warn!(
                file = %path.display(),
                position,
                "FileStreamSource: the offset written by Kafka Connect does not fall right after a line \
                 when read as Kafka Connect counts (UTF-16 code units from the file's start); resuming at \
                 byte {position} as Kafka Connect itself would. Check the first records after the resume"
            );
            position
        }
        Ok(Scan::TooLong) => {
            tracing::warn!(
                file = %path.display(),
                position,
                "FileStreamSource: not converting the Kafka Connect offset of a file longer than {MAX_SCAN} \
                 bytes; resuming at byte {position}"
            );
            position
        }
        Err(_) => position,
    }
}

enum Scan {
    Converted(u64),
    NotAtLineStart,
    TooLong,
}

/// Decodes UTF-8 from the start, counting UTF-16 code units (an invalid byte counts one unit, as
/// Java's decoder replaces it with U+FFFD), until `units` are counted.
fn scan(path: &Path, units: u64) -> std::io::Result<Scan> {
    let file = std::fs::File::open(path)?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let (mut counted, mut bytes, mut last) = (0u64, 0u64, b'\n');
    let mut buf = [0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::with_capacity(4);
    while counted < units {
        if bytes > MAX_SCAN {
            return Ok(Scan::TooLong);
        }
        let n = reader.read(&mut buf)?;
        if n == 0 {
            // The file is shorter than Kafka Connect's position: let the task's own checks report it.
            return Ok(Scan::NotAtLineStart);
        }
        for &byte in &buf[..n] {
            if counted >= units {
                break;
            }
            bytes += 1;
            last = byte;
            if !pending.is_empty() && byte & 0xC0 != 0x80 {
                // A truncated sequence became one U+FFFD; this byte starts over.
                counted += 1;
                pending.clear();
            }
            if pending.is_empty() {
                match byte {
                    0xC2..=0xF4 => pending.push(byte),
                    // ASCII, or an invalid byte (one U+FFFD).
                    _ => counted += 1,
                }
                continue;
            }
            pending.push(byte);
            let needed = match pending[0] {
                0xC2..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            if pending.len() == needed {
                counted += if needed == 4 { 2 } else { 1 };
                pending.clear();
            }
        }
    }
    if counted == units && pending.is_empty() && (bytes == 0 || last == b'\n') {
        Ok(Scan::Converted(bytes))
    } else {
        Ok(Scan::NotAtLineStart)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(text: &[u8]) -> tempfile::NamedTempFile {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), text).unwrap();
        file
    }

    #[test]
    fn ascii_positions_are_bytes_already() {
        let file = file_with(b"a\nbb\nccc\n");
        assert_eq!(byte_position(file.path(), 0), 0);
        assert_eq!(byte_position(file.path(), 5), 5);
        assert_eq!(byte_position(file.path(), 9), 9);
    }

    #[test]
    fn code_units_after_multi_byte_lines_become_bytes() {
        // What Kafka Connect 4.4 committed for this file: 8 after the third line (12 bytes).
        let file = file_with("a\nb\nçé€\nlast\n".as_bytes());
        assert_eq!(byte_position(file.path(), 8), 12);
        assert_eq!(byte_position(file.path(), 13), 17);
        // A character outside the BMP is two code units (a surrogate pair) in Java.
        let file = file_with("😀\nx\n".as_bytes());
        assert_eq!(byte_position(file.path(), 3), 5);
        assert_eq!(byte_position(file.path(), 5), 7);
    }

    #[test]
    fn a_position_that_is_not_after_a_line_stays_bytes() {
        let file = file_with("çé€\nabc\n".as_bytes());
        // 2 code units is inside the first line: not a position Kafka Connect commits.
        assert_eq!(byte_position(file.path(), 2), 2);
        // Past the end of the file.
        assert_eq!(byte_position(file.path(), 100), 100);
    }

    #[test]
    fn invalid_bytes_count_one_unit_each() {
        let file = file_with(b"\xff\xfe\nok\n");
        assert_eq!(byte_position(file.path(), 3), 3);
        // A truncated sequence then a newline: U+FFFD then '\n'.
        let file = file_with(b"\xe2\x82\nok\n");
        assert_eq!(byte_position(file.path(), 2), 3);
    }

    #[test]
    fn a_missing_file_keeps_the_position() {
        assert_eq!(byte_position(Path::new("/no/such/file"), 42), 42);
    }
}
