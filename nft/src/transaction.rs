//! [`Transaction`]: the commands of one atomic change, in order, as
//! typed values; a backend commits them all or none.

use nftables::schema::{FlushObject, NfCmd, NfListObject};
use serde_json::Value;

use crate::Error;
use crate::model::{Command, VerdictMap};

/// The commands of one transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Transaction {
    commands: Vec<Command>,
}

impl Transaction {
    pub fn new() -> Transaction {
        Transaction::default()
    }

    pub fn push(&mut self, c: impl Into<Command>) {
        self.commands.push(c.into());
    }

    pub fn add(&mut self, o: NfListObject<'static>) {
        self.push(NfCmd::Add(o));
    }

    pub fn delete(&mut self, o: NfListObject<'static>) {
        self.push(NfCmd::Delete(o));
    }

    pub fn flush(&mut self, o: FlushObject<'static>) {
        self.push(NfCmd::Flush(o));
    }

    pub fn add_verdict_map(&mut self, m: VerdictMap) {
        self.push(Command::AddVerdictMap(m));
    }

    pub fn commands(&self) -> &[Command] {
        &self.commands
    }

    pub fn into_commands(self) -> Vec<Command> {
        self.commands
    }

    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    pub fn len(&self) -> usize {
        self.commands.len()
    }

    /// The whole transaction in nft's JSON (`{"nftables": [...]}`), the
    /// `nft` program's input.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert(
            "nftables".into(),
            Value::Array(self.commands.iter().map(Command::to_json).collect()),
        );
        Value::Object(m)
    }

    /// A transaction from nft's JSON: for tests and tools that write
    /// commands by hand.
    pub fn from_json(v: &Value) -> Result<Transaction, Error> {
        let cmds = v
            .get("nftables")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::Json(v.to_string()))?;
        Ok(Transaction {
            commands: cmds
                .iter()
                .map(Command::from_json)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl FromIterator<Command> for Transaction {
    fn from_iter<I: IntoIterator<Item = Command>>(it: I) -> Transaction {
        Transaction {
            commands: it.into_iter().collect(),
        }
    }
}

impl Extend<Command> for Transaction {
    fn extend<I: IntoIterator<Item = Command>>(&mut self, it: I) {
        self.commands.extend(it);
    }
}

/// The transaction as nft's JSON, in one line.
impl std::fmt::Display for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_json())
    }
}
