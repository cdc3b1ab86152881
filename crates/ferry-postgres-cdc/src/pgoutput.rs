//! A decoder of pgoutput protocol version 1 change messages (Relation, Insert, Update, Delete,
//! Truncate; Type and Origin are recognised and ignored). Pure: bytes in, typed messages out, so it
//! is tested without a server. BEGIN and COMMIT are decoded by the transport (see `stream`).

/// One column of a Relation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelColumn {
    /// Part of the replica identity key.
    pub key: bool,
    /// The column's name.
    pub name: String,
    /// Its type OID.
    pub type_oid: u32,
    /// Its type modifier (-1: none).
    pub typmod: i32,
}

/// A Relation message: the table's shape, sent before its first change in a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The table's OID.
    pub oid: u32,
    /// Its schema.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `d`efault, `n`othing, `f`ull or `i`ndex.
    pub replica_identity: u8,
    /// The columns, in order.
    pub columns: Vec<RelColumn>,
}

/// One column value of a tuple.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Datum {
    /// SQL NULL.
    Null,
    /// An unchanged TOASTed value that was not sent.
    Unchanged,
    /// The value's text form.
    Text(String),
}

/// A decoded change message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A table's shape.
    Relation(Relation),
    /// A new row.
    Insert {
        /// The table.
        rel: u32,
        /// The row.
        new: Vec<Datum>,
    },
    /// A changed row; `old` is the key (`K`) or the whole old row (`O`) when sent.
    Update {
        /// The table.
        rel: u32,
        /// The old key or row.
        old: Option<Vec<Datum>>,
        /// The new row.
        new: Vec<Datum>,
    },
    /// A deleted row: its key (`K`) or whole old row (`O`).
    Delete {
        /// The table.
        rel: u32,
        /// The old key or row.
        old: Vec<Datum>,
    },
    /// Truncated tables.
    Truncate {
        /// The tables.
        rels: Vec<u32>,
    },
    /// Anything else (Type, Origin, …): no record.
    Other(u8),
}

impl Message {
    /// Whether the message is a row change (counted by the resume ordinal).
    pub fn is_change(&self) -> bool {
        matches!(
            self,
            Message::Insert { .. }
                | Message::Update { .. }
                | Message::Delete { .. }
                | Message::Truncate { .. }
        )
    }
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.buf.len() < n {
            return Err(format!(
                "truncated {what}: needs {n} bytes, {} left",
                self.buf.len()
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn i16(&mut self, what: &str) -> Result<i16, String> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u32(&mut self, what: &str) -> Result<u32, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn cstr(&mut self, what: &str) -> Result<String, String> {
        let end = self
            .buf
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| format!("{what} has no terminating NUL"))?;
        let s = String::from_utf8(self.buf[..end].to_vec())
            .map_err(|_| format!("{what} is not UTF-8"))?;
        self.buf = &self.buf[end + 1..];
        Ok(s)
    }

    fn tuple(&mut self) -> Result<Vec<Datum>, String> {
        let n = self.i16("tuple column count")?;
        let n = usize::try_from(n).map_err(|_| "negative tuple column count".to_owned())?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(match self.u8("tuple column kind")? {
                b'n' => Datum::Null,
                b'u' => Datum::Unchanged,
                b't' => {
                    let len = self.i32("text length")?;
                    let len =
                        usize::try_from(len).map_err(|_| "negative text length".to_owned())?;
                    let bytes = self.take(len, "text value")?;
                    Datum::Text(
                        String::from_utf8(bytes.to_vec())
                            .map_err(|_| "text value is not UTF-8".to_owned())?,
                    )
                }
                b'b' => return Err("binary tuple values were not requested".into()),
                other => return Err(format!("unknown tuple column kind {:?}", char::from(other))),
            });
        }
        Ok(out)
    }
}

/// Decodes one pgoutput message (not BEGIN/COMMIT).
///
/// # Errors
/// A truncated or malformed message, described.
pub fn decode(data: &[u8]) -> Result<Message, String> {
    let mut r = Reader { buf: data };
    let tag = r.u8("message tag")?;
    match tag {
        b'R' => {
            let oid = r.u32("relation oid")?;
            let namespace = r.cstr("namespace")?;
            let name = r.cstr("relation name")?;
            let replica_identity = r.u8("replica identity")?;
            let n = r.i16("column count")?;
            let mut columns = Vec::new();
            for _ in 0..n {
                let flags = r.u8("column flags")?;
                let name = r.cstr("column name")?;
                let type_oid = r.u32("column type")?;
                let typmod = r.i32("column typmod")?;
                columns.push(RelColumn {
                    key: flags & 1 == 1,
                    name,
                    type_oid,
                    typmod,
                });
            }
            // pgoutput writes "pg_catalog" as an empty namespace.
            let namespace = if namespace.is_empty() {
                "pg_catalog".to_owned()
            } else {
                namespace
            };
            Ok(Message::Relation(Relation {
                oid,
                namespace,
                name,
                replica_identity,
                columns,
            }))
        }
        b'I' => {
            let rel = r.u32("relation oid")?;
            match r.u8("insert tuple kind")? {
                b'N' => Ok(Message::Insert {
                    rel,
                    new: r.tuple()?,
                }),
                other => Err(format!("insert: expected N, got {:?}", char::from(other))),
            }
        }
        b'U' => {
            let rel = r.u32("relation oid")?;
            let mut kind = r.u8("update tuple kind")?;
            let mut old = None;
            if kind == b'K' || kind == b'O' {
                old = Some(r.tuple()?);
                kind = r.u8("update new tuple kind")?;
            }
            if kind != b'N' {
                return Err(format!("update: expected N, got {:?}", char::from(kind)));
            }
            Ok(Message::Update {
                rel,
                old,
                new: r.tuple()?,
            })
        }
        b'D' => {
            let rel = r.u32("relation oid")?;
            match r.u8("delete tuple kind")? {
                b'K' | b'O' => Ok(Message::Delete {
                    rel,
                    old: r.tuple()?,
                }),
                other => Err(format!(
                    "delete: expected K or O, got {:?}",
                    char::from(other)
                )),
            }
        }
        b'T' => {
            let n = r.i32("truncate relation count")?;
            let _options = r.u8("truncate options")?;
            let mut rels = Vec::new();
            for _ in 0..n {
                rels.push(r.u32("truncated relation oid")?);
            }
            Ok(Message::Truncate { rels })
        }
        other => Ok(Message::Other(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: &[Option<&str>]) -> Vec<u8> {
        let mut out = (values.len() as i16).to_be_bytes().to_vec();
        for v in values {
            match v {
                None => out.push(b'n'),
                Some(s) => {
                    out.push(b't');
                    out.extend((s.len() as i32).to_be_bytes());
                    out.extend(s.as_bytes());
                }
            }
        }
        out
    }

    #[test]
    fn a_relation_and_its_changes_decode() {
        let mut rel = vec![b'R'];
        rel.extend(16385_u32.to_be_bytes());
        rel.extend(b"public\0items\0");
        rel.push(b'd');
        rel.extend(2_i16.to_be_bytes());
        rel.push(1);
        rel.extend(b"id\0");
        rel.extend(23_u32.to_be_bytes());
        rel.extend((-1_i32).to_be_bytes());
        rel.push(0);
        rel.extend(b"note\0");
        rel.extend(25_u32.to_be_bytes());
        rel.extend((-1_i32).to_be_bytes());
        let Ok(Message::Relation(r)) = decode(&rel) else {
            panic!("relation")
        };
        assert_eq!(
            (r.namespace.as_str(), r.name.as_str(), r.columns.len()),
            ("public", "items", 2)
        );
        assert!(r.columns[0].key && !r.columns[1].key);

        let mut update = vec![b'U'];
        update.extend(16385_u32.to_be_bytes());
        update.push(b'K');
        update.extend(tuple(&[Some("1"), None]));
        update.push(b'N');
        update.extend(tuple(&[Some("2"), Some("x")]));
        assert_eq!(
            decode(&update),
            Ok(Message::Update {
                rel: 16385,
                old: Some(vec![Datum::Text("1".into()), Datum::Null]),
                new: vec![Datum::Text("2".into()), Datum::Text("x".into())],
            })
        );
        assert!(
            decode(&update[..update.len() - 1]).is_err(),
            "a truncated message is an error"
        );
    }
}
