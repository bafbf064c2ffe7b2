//! Symbolic dims: integer polynomials over named dims (`batch`, `batch*3`, `seq+1`, `2*h*w`), so
//! shapes stay exact through arithmetic on shapes (Reshape of Shape → Gather → Mul → Concat).

use std::collections::BTreeMap;
use std::fmt;

/// A dim value: a sum of monomials with integer coefficients. A monomial is a sorted list of
/// symbol names (repeats allowed); the empty monomial is the constant term.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymDim {
    terms: BTreeMap<Vec<String>, i64>,
}

impl SymDim {
    pub fn known(n: i64) -> SymDim {
        let mut terms = BTreeMap::new();
        if n != 0 {
            terms.insert(Vec::new(), n);
        }
        SymDim { terms }
    }

    pub fn sym(name: &str) -> SymDim {
        let mut terms = BTreeMap::new();
        terms.insert(vec![name.to_string()], 1);
        SymDim { terms }
    }

    /// The value when the dim has no symbols.
    pub fn as_known(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    pub fn is_known(&self) -> bool {
        self.as_known().is_some()
    }

    fn normalize(mut self) -> SymDim {
        self.terms.retain(|_, c| *c != 0);
        self
    }

    pub fn add(&self, o: &SymDim) -> SymDim {
        let mut r = self.clone();
        for (m, c) in &o.terms {
            *r.terms.entry(m.clone()).or_insert(0) += c;
        }
        r.normalize()
    }

    pub fn neg(&self) -> SymDim {
        SymDim {
            terms: self.terms.iter().map(|(m, c)| (m.clone(), -c)).collect(),
        }
    }

    pub fn sub(&self, o: &SymDim) -> SymDim {
        self.add(&o.neg())
    }

    pub fn mul(&self, o: &SymDim) -> SymDim {
        let mut terms: BTreeMap<Vec<String>, i64> = BTreeMap::new();
        for (m1, c1) in &self.terms {
            for (m2, c2) in &o.terms {
                let mut m: Vec<String> = m1.iter().chain(m2).cloned().collect();
                m.sort();
                *terms.entry(m).or_insert(0) += c1.saturating_mul(*c2);
            }
        }
        SymDim { terms }.normalize()
    }

    /// `self / o` when it divides exactly: by a constant that divides every coefficient, or by a
    /// single monomial that divides every term.
    pub fn div_exact(&self, o: &SymDim) -> Option<SymDim> {
        if o.terms.len() != 1 {
            return None;
        }
        let (om, &oc) = o.terms.iter().next()?;
        if oc == 0 {
            return None;
        }
        let mut terms = BTreeMap::new();
        for (m, c) in &self.terms {
            if c % oc != 0 {
                return None;
            }
            let mut rest = m.clone();
            for s in om {
                let pos = rest.iter().position(|x| x == s)?;
                rest.remove(pos);
            }
            terms.insert(rest, c / oc);
        }
        Some(SymDim { terms }.normalize())
    }
}

impl From<i64> for SymDim {
    fn from(n: i64) -> Self {
        SymDim::known(n)
    }
}

impl fmt::Display for SymDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return write!(f, "0");
        }
        // Higher-degree terms first, constant last: "2*batch*seq+1".
        let mut terms: Vec<(&Vec<String>, &i64)> = self.terms.iter().collect();
        terms.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        for (i, (m, &c)) in terms.iter().enumerate() {
            let neg = c < 0;
            if i > 0 {
                write!(f, "{}", if neg { "-" } else { "+" })?;
            } else if neg {
                write!(f, "-")?;
            }
            let a = c.unsigned_abs();
            if m.is_empty() {
                write!(f, "{a}")?;
            } else {
                if a != 1 {
                    write!(f, "{a}*")?;
                }
                write!(f, "{}", m.join("*"))?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for SymDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_printing() {
        let b = SymDim::sym("batch");
        let s = SymDim::sym("seq");
        assert_eq!(b.mul(&3.into()).to_string(), "3*batch");
        assert_eq!(s.add(&1.into()).to_string(), "seq+1");
        assert_eq!(b.mul(&s).mul(&2.into()).to_string(), "2*batch*seq");
        assert_eq!(b.sub(&b), SymDim::known(0));
        assert_eq!(
            b.mul(&s).mul(&768.into()).div_exact(&768.into()),
            Some(b.mul(&s))
        );
        assert_eq!(b.mul(&s).div_exact(&s), Some(b.clone()));
        assert_eq!(b.add(&1.into()).div_exact(&2.into()), None);
        assert_eq!(SymDim::known(12).div_exact(&5.into()), None);
        assert_eq!(SymDim::known(7).as_known(), Some(7));
        assert_eq!(s.sub(&2.into()).to_string(), "seq-2");
        assert_eq!(SymDim::known(-3).to_string(), "-3");
    }
}
