mod check;
mod golden;
mod journal;
mod keys;
mod stamp;
