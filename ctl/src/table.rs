//! Plain aligned text tables, kubectl style.

/// A table of text cells; columns are as wide as their widest cell and
/// separated by three spaces. The last column is not padded.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<I: IntoIterator<Item = S>, S: Into<String>>(headers: I) -> Table {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank, extra cells are dropped.
    pub fn row<I: IntoIterator<Item = S>, S: Into<String>>(&mut self, cells: I) {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(self.headers.len(), String::new());
        self.rows.push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                std::iter::once(&self.headers[i])
                    .chain(self.rows.iter().map(|r| &r[i]))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.headers).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("   ");
                }
                line.push_str(cell);
                let pad = widths[i] - cell.chars().count();
                line.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_to_the_widest_cell() {
        let mut t = Table::new(["PEER", "ASN", "STATE"]);
        t.row(["192.0.2.1", "65001", "Established"]);
        t.row(["2001:db8::1", "4200000000", "Idle"]);
        assert_eq!(
            t.render(),
            "PEER          ASN          STATE\n\
             192.0.2.1     65001        Established\n\
             2001:db8::1   4200000000   Idle\n"
        );
    }

    #[test]
    fn short_rows_are_padded_and_trailing_blanks_trimmed() {
        let mut t = Table::new(["A", "B", "C"]);
        t.row(["x"]);
        t.row(["long", "", "z"]);
        assert_eq!(t.render(), "A      B   C\nx\nlong       z\n");
    }

    #[test]
    fn width_counts_characters_not_bytes() {
        let mut t = Table::new(["N", "X"]);
        t.row(["é", "1"]);
        assert_eq!(t.render(), "N   X\né   1\n");
    }
}
