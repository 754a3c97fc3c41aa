use super::*;

#[test]
fn memory_bare_is_gib_a_unit_is_bytes() {
    let q = |s: &str| Quantity(s.into());
    assert_eq!(memory_mib(&q("16")), Some(16384));
    assert_eq!(memory_mib(&q("1Gi")), Some(1024));
    assert_eq!(memory_mib(&q("1536Mi")), Some(1536));
    assert_eq!(memory_mib(&q("1000")), Some(0), "printed 1k: bytes");
    assert_eq!(memory_mib(&q("1500")), Some(1500 * 1024), "printed bare: GiB");
    assert_eq!(memory_mib(&q("1.5")), Some(0), "not an integer: none");
    assert_eq!(memory_mib(&q("2100001")), None, "out of range drops the request");
}

#[test]
fn registration_reads_go_json() {
    let cards = devices(r#"[{"uuid":"a","totalDevCount":4,"totalCompute":100,"totalVRam":16384,"healthy":true,"qosPolicy":"fixed-share","linkZone":2},{"UUID":"b"}]"#, 3).unwrap();
    assert_eq!((cards[0].count, cards[0].devmem, cards[0].health, cards[0].vendor), (4, 16384, true, 3));
    assert_eq!((qos_of(&cards[0]), zone_of(&cards[0])), ("fixed-share", 2));
    assert_eq!((cards[1].id.as_str(), cards[1].index, cards[1].health), ("b", 1, false), "keys ignore case");
    assert!(devices("[]", 1).unwrap().is_empty());
    assert!(devices(r#"[{"uuid":"a","totalVRam":1.5}]"#, 1).unwrap_err().contains("totalVRam"));
    assert!(devices("{bad", 1).is_err());
}

#[test]
fn webhook_checks_class_and_qos() {
    assert_eq!(admit(None, None, 2), Ok(Some((QOS_KEY.into(), "best-effort".into()))));
    assert_eq!(admit(Some("online"), None, 1), Ok(None));
    assert!(admit(Some("online"), None, 2).unwrap_err().contains("single device"));
    assert!(admit(Some("batch"), None, 1).unwrap_err().starts_with(APP_CLASS_KEY));
    assert!(admit(Some("offline"), Some("gold"), 1).unwrap_err().starts_with(QOS_KEY));
}

#[test]
fn classes_on_a_card() {
    assert!(class_fits(AppClass::Online, 0, 0, 0), "an idle card takes anyone");
    assert!(!class_fits(AppClass::Online, 1, 0, 0), "a card of unclassed pods takes no class");
    assert!(class_fits(AppClass::Unset, 1, 0, 0));
    assert!(class_fits(AppClass::Online, 1, 0, 1));
    assert!(!class_fits(AppClass::Offline, 2, 1, 1), "no offline pod beside an online one");
}

#[test]
fn exclusive_prefers_the_smallest_zone_that_holds_the_ask() {
    let zones = [1, 1, 1, 2, 2, 0];
    let zone = |i: usize| zones[i];
    assert_eq!(prioritize_exclusive(&[0, 1, 2, 3, 4, 5], 2, zone), [3, 4]);
    assert_eq!(prioritize_exclusive(&[0, 1, 2, 3, 4, 5], 3, zone), [0, 1, 2]);
    assert_eq!(prioritize_exclusive(&[0, 1, 2, 3, 4, 5], 4, zone), [3, 4, 0, 1]);
    assert_eq!(prioritize_exclusive(&[5, 0], 1, zone), [0]);
}

#[test]
fn link_pairs() {
    assert_eq!(link_score(&[("a", 1), ("b", 1), ("c", 1), ("d", 0), ("e", 0)]), 30);
    assert_eq!(link_score(&[("a", 1), ("a", 1)]), 0);
}

#[test]
fn metax_list_in_go_field_order() {
    let e = |uuid: &str, mem, cores| ContainerDevice {
        uuid: uuid.into(),
        device_type: WORD.into(),
        usedmem: mem,
        usedcores: cores,
    };
    let placed = vec![vec![e("a", 1024, 50), e("b", 0, 0)], vec![]];
    let out = extra_annotations(&placed, 7);
    assert_eq!(out[0].1, r#"[[{"uuid":"a","compute":50,"vRam":1024},{"uuid":"b"}],[]]"#);
    assert_eq!(out[1], (PREDICATE_TIME_KEY.into(), "7".into()));
}

#[test]
fn a_placement_asks_the_switches_its_cards_do_not_show() {
    let cards = r#"[{"uuid":"a","qosPolicy":"fixed-share"},{"uuid":"b"},{"uuid":"c","qosPolicy":"best-effort"}]"#;
    let node = crate::model::GpuNode { devices: devices(cards, 1).unwrap(), ..Default::default() };
    let e = |uuid: &str, cores| ContainerDevice {
        uuid: uuid.into(),
        device_type: WORD.into(),
        usedmem: 0,
        usedcores: cores,
    };
    let ask = PodAsk { class: AppClass::Unset, qos: "best-effort", topology: None };
    let placed = vec![vec![e("a", 10)], vec![e("a", 10), e("b", 100), e("c", 10)]];
    let switches = qos_expectations(&node, &placed, 0, ask);
    assert_eq!(
        switches,
        [("a".into(), "best-effort".into())],
        "the second container sees the first's switch; b shows none"
    );
    let online = PodAsk { class: AppClass::Online, ..ask };
    assert!(qos_expectations(&node, &placed, 0, online).is_empty());
}
