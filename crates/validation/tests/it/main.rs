mod check;
mod common;
mod fuzz;
mod golden;
mod journal;
mod journal_damage;
mod keys;
mod stamp;
