use report::Spread;

#[test]
fn median_of_an_odd_count_is_the_middle_value() {
    assert_eq!(Spread::of(&[5.0, 1.0, 3.0]), Some(Spread { min: 1.0, median: 3.0, max: 5.0 }));
}

#[test]
fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
    assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 10.0]).unwrap().median, 3.0);
}

#[test]
fn no_values_give_no_spread() {
    assert_eq!(Spread::of(&[]), None);
}
