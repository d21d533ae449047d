mod check;
mod journal;
mod keys;
mod stamp;
