//! A CRD's structural OpenAPI v3 schema applied to an object as the API
//! server applies it on create: null values of non-nullable fields pruned,
//! defaults filled in, then types, formats, bounds, patterns, enums,
//! required fields, list types and every `x-kubernetes-validations` rule
//! (CEL, with `self` bound to the value at its level). Unknown fields are
//! refused, as kubectl's default (strict) field validation has the API
//! server do. The object's apiVersion, kind and metadata are the API
//! server's own business and are not looked at.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use cel::{Context, Env, Program, Value as Cel};
use serde_json::Value;

use super::k8s_cel;

/// Evaluates schemas; compiled CEL programs are kept for reuse.
pub struct Evaluator {
    env: Arc<Env>,
    programs: Mutex<HashMap<String, Arc<Program>>>,
}

impl Evaluator {
    pub fn new() -> Self {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("the strings extension");
        Evaluator {
            env: Arc::new(env),
            programs: Mutex::default(),
        }
    }

    /// Every problem `schema` finds with `object` (empty: accepted).
    pub fn problems(&self, schema: &Value, object: &Value) -> Vec<String> {
        let mut obj = object.clone();
        if let Some(m) = obj.as_object_mut() {
            for k in ["apiVersion", "kind", "metadata"] {
                m.remove(k);
            }
        }
        prune_and_default(schema, &mut obj);
        let mut out = Vec::new();
        self.walk(schema, &obj, "", &mut out);
        out
    }

    fn program(&self, rule: &str) -> Result<Arc<Program>, String> {
        let mut programs = self.programs.lock().unwrap();
        if let Some(p) = programs.get(rule) {
            return Ok(p.clone());
        }
        let p = Arc::new(
            self.env
                .compile(rule)
                .map_err(|e| format!("does not compile: {e}"))?,
        );
        programs.insert(rule.to_string(), p.clone());
        Ok(p)
    }

    /// Runs one rule with `self` bound to `value`: Ok(true) when it holds.
    pub fn rule_holds(&self, rule: &str, value: &Value) -> Result<bool, String> {
        let program = self.program(rule)?;
        let mut ctx = Context::with_env(self.env.clone());
        k8s_cel::install(&mut ctx);
        ctx.add_variable_from_value("self", to_cel(value));
        match program.execute(&ctx) {
            Ok(Cel::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("gave {other:?}, not a bool")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Runs a transition rule with `self` bound to `new` and `oldSelf`
    /// to `old`, as the API server does on an update: Ok(true) when it
    /// holds.
    pub fn transition_holds(&self, rule: &str, new: &Value, old: &Value) -> Result<bool, String> {
        let program = self.program(rule)?;
        let mut ctx = Context::with_env(self.env.clone());
        k8s_cel::install(&mut ctx);
        ctx.add_variable_from_value("self", to_cel(new));
        ctx.add_variable_from_value("oldSelf", to_cel(old));
        match program.execute(&ctx) {
            Ok(Cel::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("gave {other:?}, not a bool")),
            Err(e) => Err(e.to_string()),
        }
    }

    fn walk(&self, s: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
        let at = if path.is_empty() { "<root>" } else { path };
        let mut mine = Vec::new();
        let mut bad = |why: String| mine.push(format!("{at}: {why}"));
        if v.is_null() {
            if s.get("nullable") != Some(&Value::Bool(true)) {
                out.push(format!("{at}: must not be null"));
            }
            return;
        }
        let int_or_string = s.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
        let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
        let type_ok = match ty {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            _ if int_or_string => v.is_string() || v.is_i64() || v.is_u64(),
            _ => true,
        };
        if !type_ok {
            out.push(format!("{at}: {v} is not of type {ty}"));
            return;
        }
        if let Some(n) = v.as_f64() {
            let limit = |k: &str| s.get(k).and_then(Value::as_f64);
            if let Some(min) = limit("minimum")
                && n < min
            {
                bad(format!("{v} is less than the minimum {min}"));
            }
            if let Some(max) = limit("maximum")
                && n > max
            {
                bad(format!("{v} is more than the maximum {max}"));
            }
            let range = match s.get("format").and_then(Value::as_str) {
                Some("int32") => Some((i32::MIN as f64, i32::MAX as f64)),
                Some("int64") => Some((i64::MIN as f64, i64::MAX as f64)),
                _ => None,
            };
            if let Some((lo, hi)) = range
                && !(lo..=hi).contains(&n)
            {
                bad(format!("{v} does not fit its format"));
            }
        }
        if let Some(text) = v.as_str() {
            let chars = text.chars().count() as u64;
            if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                && chars > max
            {
                bad(format!("is longer than {max} characters"));
            }
            if let Some(min) = s.get("minLength").and_then(Value::as_u64)
                && chars < min
            {
                bad(format!("is shorter than {min} characters"));
            }
            if let Some(p) = s.get("pattern").and_then(Value::as_str) {
                let rule = format!("self.matches({})", cel_string(p));
                if !self.rule_holds(&rule, v).unwrap_or(false) {
                    bad(format!("{v} does not match {p}"));
                }
            }
        }
        if let Some(values) = s.get("enum").and_then(Value::as_array)
            && !values.contains(v)
        {
            bad(format!("{v} is not one of {values:?}"));
        }
        if let Some(items) = v.as_array() {
            let n = items.len() as u64;
            if s.get("maxItems")
                .and_then(Value::as_u64)
                .is_some_and(|m| n > m)
            {
                bad(format!("has more than {} items", s["maxItems"]));
            }
            if s.get("minItems")
                .and_then(Value::as_u64)
                .is_some_and(|m| n < m)
            {
                bad(format!("has fewer than {} items", s["minItems"]));
            }
            match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    let mut seen = HashSet::new();
                    for item in items {
                        if !seen.insert(item.to_string()) {
                            bad(format!("Duplicate value: {item}"));
                        }
                    }
                }
                Some("map") => {
                    let keys: Vec<&str> = s["x-kubernetes-list-map-keys"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let mut seen = HashSet::new();
                    for item in items {
                        let key: Vec<String> = keys.iter().map(|k| item[k].to_string()).collect();
                        if !seen.insert(key.clone()) {
                            bad(format!("Duplicate value: {key:?}"));
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    self.walk(item_schema, item, &format!("{path}[{i}]"), out);
                }
            }
        }
        if let Some(m) = v.as_object() {
            let n = m.len() as u64;
            if s.get("maxProperties")
                .and_then(Value::as_u64)
                .is_some_and(|x| n > x)
            {
                bad(format!("has more than {} properties", s["maxProperties"]));
            }
            for r in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(r) = r.as_str()
                    && !m.contains_key(r)
                {
                    bad(format!("{r}: Required value"));
                }
            }
            let props = s.get("properties").and_then(Value::as_object);
            let extra = s.get("additionalProperties");
            let preserve =
                s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            for (k, child) in m {
                let child_path = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (props.and_then(|p| p.get(k)), extra) {
                    (Some(cs), _) => self.walk(cs, child, &child_path, out),
                    (None, Some(cs)) if cs.is_object() => {
                        self.walk(cs, child, &format!("{path}[{k}]"), out)
                    }
                    _ if preserve => {}
                    _ => out.push(format!("{child_path}: unknown field")),
                }
            }
        }
        out.extend(mine);
        for r in s
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let rule = r["rule"].as_str().unwrap_or_default();
            let message = r["message"].as_str().unwrap_or_default();
            if rule.contains("oldSelf") {
                // A transition rule: the API server runs it only on an
                // update (see `transition_holds`), and this is a create.
                continue;
            }
            match self.rule_holds(rule, v) {
                Ok(true) => {}
                Ok(false) => out.push(format!("{at}: {message}")),
                Err(e) => out.push(format!("{at}: {message} (rule error: {e})")),
            }
        }
    }
}

/// Drops null values where the schema does not allow null, then fills in
/// defaults of missing fields, as the API server does before validating.
pub fn prune_and_default(s: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            if let Some(props) = props {
                m.retain(|k, val| {
                    !(val.is_null()
                        && props
                            .get(k)
                            .is_some_and(|p| p.get("nullable") != Some(&Value::Bool(true))))
                });
                for (k, p) in props {
                    if let Some(d) = p.get("default")
                        && !m.contains_key(k)
                    {
                        m.insert(k.clone(), d.clone());
                    }
                }
            }
            for (k, child) in m.iter_mut() {
                let cs = props
                    .and_then(|p| p.get(k))
                    .or_else(|| s.get("additionalProperties"));
                if let Some(cs) = cs {
                    prune_and_default(cs, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                items.iter_mut().for_each(|i| prune_and_default(is, i));
            }
        }
        _ => {}
    }
}

/// `text` as a CEL string literal.
fn cel_string(text: &str) -> String {
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A JSON value as CEL sees a value of a structural schema: integers are
/// `int`, objects are maps with string keys.
pub fn to_cel(v: &Value) -> Cel {
    match v {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(a) => Cel::List(Arc::new(a.iter().map(to_cel).collect())),
        Value::Object(m) => {
            let map: HashMap<String, Cel> = m.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            map.into()
        }
    }
}
