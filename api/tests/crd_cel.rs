//! kubectl parity: the CRD schemas, evaluated as the API server evaluates
//! them (OpenAPI constraints and CEL rules, with the Kubernetes IP and CIDR
//! libraries), refuse every invalid example of `invalid_objects.rs` that
//! they can express, and accept every valid one. The examples are read
//! from that file's source, so that a new one cannot slip by: it is either
//! refused by the schema or named below with the reason it cannot be.

mod crd_cel {
    pub mod k8s_cel;
    pub mod schema;
}

use std::path::Path;

use crd_cel::schema::Evaluator;
use serde_json::Value;
use tartan_api::Kind;
use tartan_api::resources::crds;

/// Invalid examples the CRD schema does not refuse, by a part of their
/// expected message, and why it cannot. tartanctl and the agents refuse
/// all of them (`tartan_api::validate`, on write and on read).
const NOT_EXPRESSIBLE: &[(&str, &str)] = &[
    (
        "metadata.name: \"Pool_A\" is not a valid name",
        "metadata: the API server checks object names itself, outside the schema",
    ),
    (
        "metadata.name: a per-node BGPConfiguration is named node.<nodename>",
        "metadata: the API server refuses the name node. itself (not a DNS subdomain)",
    ),
    (
        "metadata.namespace: \"default\" is set but IPPool is cluster-wide",
        "metadata: the API server drops the namespace of a cluster-wide object",
    ),
    (
        "metadata.namespace: missing; a NetworkPolicy lives in a namespace",
        "metadata: the namespace comes from the request (kubectl's current namespace)",
    ),
    (
        "metadata.namespace: \"Default\" is not a DNS label",
        "metadata: the API server checks the namespace of the request itself",
    ),
    (
        "kind: \"IPPools\" in apiVersion \"tartan.dev/v1\" is not a kind Tartan knows",
        "no such kind: there is no CRD to hold a schema",
    ),
    (
        "spec.ingress[0].source.selector: \"role = 'x'\" is not a selector",
        "selector grammar: CEL cannot parse selectors; the schema's sound approximation (printable, ends with ')', '}' or a quote) lets this one by",
    ),
    (
        "spec.selector: \"a in {'x'\" is not a selector",
        "selector grammar: an unclosed set that ends with a quoted value passes the approximation",
    ),
    (
        "global() is only allowed",
        "where global() stands: telling the term from the same letters in a quoted value takes the selector's tokens, and a regular expression over every selector of every rule would spend the CRD's CEL cost budget; the grammar's approximation lets it by",
    ),
    (
        "at most 1048576 members",
        "RangeAllocation size: the member count of a CIDR or port range is arithmetic on a parsed range, which CEL cannot do for both forms",
    ),
    (
        "members need",
        "RangeAllocation bitmap length against its range's size: the same arithmetic",
    ),
    (
        "metadata.annotations: \"bad key\" is not a valid annotation key",
        "a rule's metadata annotations: a free-form map in the schema, as in Calico's CRD; their keys are checked as an object's annotation keys are, which lowercases Unicode first",
    ),
    (
        "is not a regular expression",
        "regular expressions: CEL cannot check that a string compiles as one",
    ),
    (
        "metadata.annotations[tartan.dev/bgp-ipv4-address]",
        "Node is Kubernetes' kind: Tartan's annotations on it have no CRD schema",
    ),
    (
        "metadata.annotations[tartan.dev/bgp-ipv6-address]",
        "Node is Kubernetes' kind: Tartan's annotations on it have no CRD schema",
    ),
    (
        "metadata.annotations[tartan.dev/bgp-as-number]",
        "Node is Kubernetes' kind: Tartan's annotations on it have no CRD schema",
    ),
    (
        "metadata.annotations[tartan.dev/route-reflector-cluster-id]",
        "Node is Kubernetes' kind: Tartan's annotations on it have no CRD schema",
    ),
];

/// The schema of the CRD of the object's kind, if Tartan has one.
fn schema_for(obj: &Value) -> Option<Value> {
    let api_version = obj["apiVersion"].as_str()?;
    let kind = Kind::from_type(api_version, obj["kind"].as_str()?)?;
    crds().into_iter().find_map(|c| {
        (c.spec.names.kind == kind.info().name && c.spec.group == kind.info().group).then(|| {
            serde_json::to_value(&c).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
                .clone()
        })
    })
}

fn parse(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// The examples of one function of `invalid_objects.rs` (`bad_objects` or
/// `good_objects`), each as (object text, expected message or "").
fn examples(function: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid_objects.rs");
    let source = std::fs::read_to_string(&path).unwrap();
    let file = syn::parse_file(&source).unwrap();
    let body = file
        .items
        .iter()
        .find_map(|item| match item {
            syn::Item::Fn(f) if f.sig.ident == function => Some(f.block.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no fn {function} in {}", path.display()));
    let Some(syn::Stmt::Expr(syn::Expr::Macro(m), _)) = body.stmts.last() else {
        panic!("{function} does not end in vec![...]");
    };
    let cases = m
        .mac
        .parse_body_with(syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated)
        .unwrap();
    cases
        .iter()
        .map(|case| match case {
            syn::Expr::Tuple(t) => (object_text(&t.elems[0]), string_lit(&t.elems[1])),
            other => (object_text(other), String::new()),
        })
        .collect()
}

fn string_lit(e: &syn::Expr) -> String {
    match e {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => s.value(),
        other => panic!("not a string literal: {}", quote_of(other)),
    }
}

/// What kind of expression `e` is, for a message.
fn quote_of(e: &syn::Expr) -> &'static str {
    match e {
        syn::Expr::Call(_) => "a call",
        syn::Expr::MethodCall(_) => "a method call",
        syn::Expr::Macro(_) => "a macro",
        syn::Expr::Lit(_) => "a literal",
        _ => "an expression",
    }
}

/// The text an example's expression makes, with the helpers of
/// `invalid_objects.rs` done again here.
fn object_text(e: &syn::Expr) -> String {
    match e {
        syn::Expr::MethodCall(m) if m.method == "into" => string_lit(&m.receiver),
        syn::Expr::Call(c) => {
            let syn::Expr::Path(p) = &*c.func else {
                panic!("unknown example form: {}", quote_of(e));
            };
            let name = p.path.segments.last().unwrap().ident.to_string();
            let args: Vec<String> = c.args.iter().map(string_lit).collect();
            let cluster = |kind: &str, name: &str, spec: &str| {
                format!(
                    "{{apiVersion: tartan.dev/v1, kind: {kind}, metadata: {{name: {name}}}, spec: {spec}}}"
                )
            };
            match (name.as_str(), &args[..]) {
                ("cluster", [k, n, s]) => cluster(k, n, s),
                ("pool", [s]) => cluster("IPPool", "pool-a", s),
                ("bgpconfig", [s]) => cluster("BGPConfiguration", "default", s),
                ("peer", [s]) => cluster("BGPPeer", "tor", s),
                ("filter", [s]) => cluster("BGPFilter", "f", s),
                ("block", [s]) => cluster("IPAMBlock", "10-0-0-0-30", s),
                ("wep", [s]) => format!(
                    "{{apiVersion: tartan.dev/v1, kind: WorkloadEndpoint, metadata: {{name: web-0.eth0, namespace: default}}, spec: {s}}}"
                ),
                ("tnp", [n, s]) => format!(
                    "{{apiVersion: tartan.dev/v1, kind: NetworkPolicy, metadata: {{name: {n}, namespace: default}}, spec: {s}}}"
                ),
                ("netset", [s]) => format!(
                    "{{apiVersion: tartan.dev/v1, kind: NetworkSet, metadata: {{name: partners, namespace: default}}, spec: {s}}}"
                ),
                ("too_many_nets", []) => {
                    let n = tartan_api::resources::schema_rules::NETWORK_SET_MAX as usize + 1;
                    let nets = vec!["10.0.0.0/24"; n].join(", ");
                    cluster("GlobalNetworkSet", "big", &format!("{{nets: [{nets}]}}"))
                }
                ("node", [a]) => format!(
                    "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-a\n  annotations:\n{a}\n"
                ),
                _ => panic!(
                    "example helper {name}({}) is unknown here; teach object_text it",
                    args.len()
                ),
            }
        }
        other => panic!("unknown example form: {}", quote_of(other)),
    }
}

#[test]
fn invalid_examples_are_refused_by_the_schema_or_listed() {
    let eval = Evaluator::new();
    let cases = examples("bad_objects");
    assert!(cases.len() >= 80, "only {} examples read", cases.len());
    let mut failures = Vec::new();
    let mut listed_used = vec![false; NOT_EXPRESSIBLE.len()];
    let mut refused = 0;
    let mut listed_cases = 0;
    for (text, want) in &cases {
        let obj = parse(text);
        let listed = NOT_EXPRESSIBLE.iter().position(|(w, _)| want.contains(w));
        // A refusal counts only when some rule or constraint says no, not
        // when every complaint is a rule that could not be evaluated.
        let problems = schema_for(&obj).map(|s| {
            let p = eval.problems(&s, &obj);
            if p.iter().all(|p| p.contains("(rule error:")) {
                vec![]
            } else {
                p
            }
        });
        match (problems, listed) {
            (Some(p), None) if !p.is_empty() => {
                refused += 1;
                println!("refused: {want}\n  by: {p:?}");
            }
            (Some(p), Some(i)) if !p.is_empty() => failures.push(format!(
                "refused by the schema, so take it out of NOT_EXPRESSIBLE ({}): {text}\n  {p:?}",
                NOT_EXPRESSIBLE[i].0
            )),
            (_, Some(i)) => {
                listed_used[i] = true;
                listed_cases += 1;
            }
            (_, None) => failures.push(format!(
                "accepted by the schema and not listed as inexpressible: {text}\n  wanted: {want}"
            )),
        }
    }
    for (used, (w, _)) in listed_used.iter().zip(NOT_EXPRESSIBLE) {
        if !used {
            failures.push(format!("NOT_EXPRESSIBLE names no example: {w}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert_eq!(refused + listed_cases, cases.len());
    println!(
        "{refused} of {} invalid examples refused by the CRD schemas; {listed_cases} not expressible",
        cases.len(),
    );
}

#[test]
fn valid_examples_pass_the_schema() {
    let eval = Evaluator::new();
    let mut objects: Vec<Value> = examples("good_objects")
        .iter()
        .map(|(text, _)| parse(text))
        .collect();
    assert!(objects.len() >= 20);
    for kind in Kind::tartan() {
        let o = tartan_api::examples::example(kind, "example-1");
        objects.push(serde_json::to_value(o).unwrap());
    }
    let mut failures = Vec::new();
    for obj in &objects {
        let Some(schema) = schema_for(obj) else {
            assert_eq!(obj["kind"], "Node", "no CRD for {obj}");
            continue;
        };
        let p = eval.problems(&schema, obj);
        if !p.is_empty() {
            failures.push(format!("{obj}\n  {p:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn every_kind_refuses_something() {
    // Each kind's schema carries rules: one bad example per kind at least
    // is refused (guards against a schema that the evaluator skips).
    let eval = Evaluator::new();
    let mut kinds = std::collections::HashSet::new();
    for (text, _) in examples("bad_objects") {
        let obj = parse(&text);
        if let Some(s) = schema_for(&obj)
            && !eval.problems(&s, &obj).is_empty()
        {
            kinds.insert(obj["kind"].as_str().unwrap().to_string());
        }
    }
    for k in Kind::tartan() {
        assert!(kinds.contains(k.info().name), "no refused example of {k}");
    }
}

#[test]
fn no_crd_has_an_unsigned_format() {
    fn formats(v: &Value, path: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(f) = m.get("format").and_then(Value::as_str)
                    && !["int32", "int64", "double", "float", "byte", "date-time"].contains(&f)
                {
                    out.push(format!("{path}: format {f}"));
                }
                for (k, c) in m {
                    formats(c, &format!("{path}.{k}"), out);
                }
            }
            Value::Array(a) => a.iter().for_each(|c| formats(c, path, out)),
            _ => {}
        }
    }
    let mut bad = Vec::new();
    for c in crds() {
        formats(
            &serde_json::to_value(&c).unwrap(),
            c.metadata.name.as_deref().unwrap(),
            &mut bad,
        );
    }
    assert!(bad.is_empty(), "{bad:#?}");
    let pool = crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "IPAMHandle")
        .unwrap();
    let v = serde_json::to_value(pool).unwrap();
    let count = &v["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["block"]["additionalProperties"];
    assert_eq!(count["format"], "int64", "{count}");
    assert_eq!(
        count["maximum"].as_f64(),
        Some(f64::from(u32::MAX)),
        "{count}"
    );
}

/// The rules judged one value at a time, against the parsers they stand for.
#[test]
fn rules_agree_with_the_parsers_on_edge_values() {
    use tartan_api::resources::bgppeer::parse_peer_ip;
    let eval = Evaluator::new();
    let peer = crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "BGPPeer")
        .unwrap();
    let schema =
        serde_json::to_value(peer).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            .clone();
    for ip in [
        "192.0.2.1",
        "2001:db8::1",
        "192.0.2.1:1179",
        "[2001:db8::1]:179",
        "192.0.2.1:0",
        "192.0.2.1:70000",
        "0.0.0.0",
        "224.0.0.1",
        "[ff02::1]:179",
        "::",
        "router",
        "[192.0.2.1]:179",
        "2001:db8::1:179:x",
    ] {
        let obj = serde_json::json!({"spec": {"peerIP": ip, "asNumber": 65001}});
        let by_schema = eval.problems(&schema, &obj).is_empty();
        assert_eq!(by_schema, parse_peer_ip(ip).is_ok(), "{ip}");
    }
    let community = tartan_api::resources::schema_rules::community_cel("self");
    for c in [
        "0:0",
        "65535:65535",
        "65536:1",
        "4294967295:0:1",
        "4294967296:0:1",
        "no-export",
        "no_export",
        "1:2:3:4",
        "",
        "a:b",
    ] {
        let holds = eval
            .rule_holds(&community, &Value::from(c))
            .unwrap_or(false);
        let parses = c
            .parse::<tartan_api::resources::community::Community>()
            .is_ok();
        assert_eq!(holds, parses, "{c}");
    }
}

/// The schema of `kind`'s CRD.
fn crd_schema(kind: &str) -> Value {
    let c = crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap();
    serde_json::to_value(c).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

/// Whether the GlobalNetworkPolicy schema takes `rule` as the only rule.
fn policy_rule_passes(eval: &Evaluator, schema: &Value, rule: Value) -> bool {
    let obj = serde_json::json!({"spec": {"ingress": [rule]}});
    eval.problems(schema, &obj).is_empty()
}

#[test]
fn port_and_protocol_rules_agree_with_their_parsers() {
    use tartan_api::resources::policy::{Port, Protocol};
    let eval = Evaluator::new();
    let schema = crd_schema("GlobalNetworkPolicy");
    let ports = [
        Value::from(80),
        Value::from(0),
        Value::from(65535),
        Value::from(65536),
        Value::from(-1),
        Value::from("443"),
        Value::from("0443"),
        Value::from("0"),
        Value::from("8000:8080"),
        Value::from("8080:8000"),
        Value::from("0:80"),
        Value::from("1:65536"),
        Value::from("1:2:3"),
        Value::from("http"),
        Value::from("http-alt"),
        Value::from("Http"),
        Value::from("http--alt"),
        Value::from("-http"),
        Value::from("123"),
        Value::from("a23456789012345"),
        Value::from("a234567890123456"),
        Value::from(""),
    ];
    for p in ports {
        let parses = serde_json::from_value::<Port>(p.clone()).is_ok_and(|p| p.check().is_ok());
        let rule = serde_json::json!({"action": "Allow", "protocol": "TCP", "destination": {"ports": [p]}});
        assert_eq!(policy_rule_passes(&eval, &schema, rule), parses, "port {p}");
    }
    let protocols = [
        Value::from("TCP"),
        Value::from("udplite"),
        Value::from("ICMPv6"),
        Value::from("GRE"),
        Value::from(47),
        Value::from("47"),
        Value::from("047"),
        Value::from(0),
        Value::from(255),
        Value::from(256),
        Value::from("256"),
        Value::from(-6),
        Value::from(""),
    ];
    for p in protocols {
        let parses = serde_json::from_value::<Protocol>(p.clone()).is_ok();
        let rule = serde_json::json!({"action": "Allow", "protocol": p});
        assert_eq!(
            policy_rule_passes(&eval, &schema, rule),
            parses,
            "protocol {p}"
        );
    }
}

#[test]
fn duration_rules_agree_with_the_parser() {
    use tartan_api::resources::common::parse_duration;
    let eval = Evaluator::new();
    let schema = crd_schema("BGPConfiguration");
    for d in [
        "1s",
        "0s",
        "120s",
        "2m",
        "1m30s",
        "1h",
        "4095s",
        "4096s",
        "68m15s",
        "68m16s",
        "1500ms",
        "999ms",
        "1h1s",
        "",
        "12",
        "s",
        "1d",
        "1.5s",
        "-1s",
        "1 s",
        "2 minutes",
    ] {
        let parses = parse_duration(d)
            .is_ok_and(|t| (1..=4095).contains(&t.as_secs()) && t.as_millis() >= 1000);
        let obj = serde_json::json!({"spec": {"gracefulRestartTime": d}});
        assert_eq!(eval.problems(&schema, &obj).is_empty(), parses, "{d:?}");
    }
}

/// The selector rules are sound: every selector the parser takes passes
/// them (they may let bad ones by).
#[test]
fn selector_rules_refuse_only_what_the_parser_refuses() {
    use tartan_api::selector::Selector;
    let eval = Evaluator::new();
    let schema = crd_schema("GlobalNetworkPolicy");
    let selectors = [
        "",
        "  ",
        "all()",
        "has(app)",
        "!has(db)",
        "app == 'web'",
        "app == \"web\"",
        "app in {'web', 'api'}",
        "app not in {}",
        "tier ends with '-end'  ",
        "(app == 'db' || app == 'web') && !has(db)",
        "app == 'x)' ",
        "app == 'web'\u{a0}",
        "role == 'db' &&",
        "role = 'x'",
        "has(",
        "a in {'x'",
        "!",
        "app == 'web'\t",
        "app",
        "a == 'b' ||",
    ];
    let mut checked = 0;
    for s in selectors {
        let obj = serde_json::json!({"spec": {"selector": s}});
        let passes = eval.problems(&schema, &obj).is_empty();
        if Selector::parse(s).is_ok() && !s.chars().any(char::is_control) {
            assert!(passes, "{s:?} parses but the schema refuses it");
            checked += 1;
        }
    }
    assert!(checked >= 12);
}

/// The evaluator itself: each kind of constraint refuses what it should,
/// and defaults are filled in before rules run.
#[test]
fn the_evaluator_applies_every_constraint() {
    let eval = Evaluator::new();
    let schema = serde_json::json!({
        "type": "object",
        "required": ["n"],
        "properties": {
            "n": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 9},
            "s": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
            "e": {"type": "string", "enum": ["A", "B"]},
            "l": {"type": "array", "maxItems": 2, "x-kubernetes-list-type": "set",
                  "items": {"type": "string"}},
            "d": {"type": "string", "default": "x"},
            "o": {"type": "string", "nullable": true},
            "c": {"type": "string",
                  "x-kubernetes-validations": [{"rule": "isCIDR(self) && cidr(self) == cidr(self).masked()", "message": "network"}]}
        },
        "x-kubernetes-validations": [{"rule": "self.d == 'x' || self.n > 5", "message": "d"}]
    });
    let ok = serde_json::json!({"n": 3, "s": "ab", "e": "A", "l": ["a", "b"], "o": null, "c": "10.0.0.0/8"});
    assert_eq!(eval.problems(&schema, &ok), Vec::<String>::new());
    for (bad, want) in [
        (serde_json::json!({}), "n: Required value"),
        (serde_json::json!({"n": 0}), "less than the minimum"),
        (serde_json::json!({"n": 10}), "more than the maximum"),
        (serde_json::json!({"n": "3"}), "not of type integer"),
        (serde_json::json!({"n": 3, "s": "abcd"}), "longer than 3"),
        (serde_json::json!({"n": 3, "s": "AB"}), "does not match"),
        (serde_json::json!({"n": 3, "e": "C"}), "is not one of"),
        (
            serde_json::json!({"n": 3, "l": ["a", "a"]}),
            "Duplicate value",
        ),
        (
            serde_json::json!({"n": 3, "l": ["a", "b", "c"]}),
            "more than 2 items",
        ),
        (serde_json::json!({"n": 3, "x": 1}), "x: unknown field"),
        (serde_json::json!({"n": 3, "d": "y"}), ": d"),
        (serde_json::json!({"n": 3, "c": "10.0.0.1/8"}), "c: network"),
        (serde_json::json!({"n": 3, "c": "10.0.0.0"}), "c: network"),
    ] {
        let p = eval.problems(&schema, &bad);
        assert!(
            p.iter().any(|p| p.contains(want)),
            "{bad}: {want} not in {p:?}"
        );
    }
}

/// The IPPool spec's transition rules (`oldSelf`): on an update, the
/// schema refuses a new `cidr` or `blockSize` as `IpPoolSpec::check_update`
/// does (the block size compared as in force: left out is the family's
/// default), and the rules are in the generated CRD.
#[test]
fn ip_pool_cidr_and_block_size_cannot_change_on_update() {
    use tartan_api::resources::IpPoolSpec;
    let eval = Evaluator::new();
    let schema = crd_schema("IPPool");
    let spec_schema = &schema["properties"]["spec"];
    let rules: Vec<&str> = spec_schema["x-kubernetes-validations"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["rule"].as_str())
        .filter(|r| r.contains("oldSelf"))
        .collect();
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert!(rules.contains(&"self.cidr == oldSelf.cidr"), "{rules:?}");
    let cases = [
        (
            r#"{"cidr": "10.0.0.0/16"}"#,
            r#"{"cidr": "10.0.0.0/16", "natOutgoing": true}"#,
            true,
        ),
        (
            r#"{"cidr": "10.0.0.0/16"}"#,
            r#"{"cidr": "10.0.0.0/16", "blockSize": 26}"#,
            true,
        ),
        (
            r#"{"cidr": "10.0.0.0/16", "blockSize": 26}"#,
            r#"{"cidr": "10.0.0.0/16"}"#,
            true,
        ),
        (
            r#"{"cidr": "fd00::/56"}"#,
            r#"{"cidr": "fd00::/56", "blockSize": 122}"#,
            true,
        ),
        (
            r#"{"cidr": "10.0.0.0/16"}"#,
            r#"{"cidr": "10.0.0.0/16", "blockSize": 24}"#,
            false,
        ),
        (
            r#"{"cidr": "10.0.0.0/16", "blockSize": 28}"#,
            r#"{"cidr": "10.0.0.0/16"}"#,
            false,
        ),
        (
            r#"{"cidr": "10.0.0.0/16"}"#,
            r#"{"cidr": "10.1.0.0/16"}"#,
            false,
        ),
        (
            r#"{"cidr": "10.0.0.0/16"}"#,
            r#"{"cidr": "10.0.0.0/8"}"#,
            false,
        ),
    ];
    for (old, new, ok) in cases {
        let (o, n): (Value, Value) = (parse(old), parse(new));
        let cel = rules
            .iter()
            .all(|r| eval.transition_holds(r, &n, &o).expect("the rule runs"));
        assert_eq!(cel, ok, "{old} -> {new}");
        let (os, ns): (IpPoolSpec, IpPoolSpec) = (
            serde_json::from_value(o).unwrap(),
            serde_json::from_value(n).unwrap(),
        );
        assert_eq!(ns.check_update(&os).is_empty(), ok, "{old} -> {new}");
    }
    // On a create the API server runs no transition rule.
    assert_eq!(
        eval.problems(
            &schema,
            &serde_json::json!({"spec": {"cidr": "10.0.0.0/16"}})
        ),
        Vec::<String>::new()
    );
}

/// IPPool rules beside the examples: link-local ranges, and pools smaller
/// than a block only when disabled; schema and `validate` agree.
#[test]
fn ip_pool_link_local_and_disabled_size_agree_with_validate() {
    use tartan_api::resources::IpPoolSpec;
    let eval = Evaluator::new();
    let schema = crd_schema("IPPool");
    for spec in [
        r#"{"cidr": "169.254.0.0/16"}"#,
        r#"{"cidr": "169.254.1.0/24"}"#,
        r#"{"cidr": "169.0.0.0/8", "blockSize": 26}"#,
        r#"{"cidr": "169.255.0.0/16"}"#,
        r#"{"cidr": "169.253.0.0/16"}"#,
        r#"{"cidr": "fe80::/64", "blockSize": 122}"#,
        r#"{"cidr": "fe00::/7", "blockSize": 122, "disabled": true}"#,
        r#"{"cidr": "fec0::/64", "blockSize": 122}"#,
        r#"{"cidr": "10.0.0.0/28"}"#,
        r#"{"cidr": "10.0.0.0/28", "disabled": true}"#,
        r#"{"cidr": "10.0.0.0/28", "disabled": false}"#,
        r#"{"cidr": "fd00::/126", "disabled": true}"#,
    ] {
        let v = parse(spec);
        let cel_ok = eval
            .problems(&schema, &serde_json::json!({"spec": v.clone()}))
            .is_empty();
        let s: IpPoolSpec = serde_json::from_value(v).unwrap();
        assert_eq!(cel_ok, s.check().is_empty(), "{spec}: {:?}", s.check());
    }
}
