mod bonnie;
mod cli;
mod jobfile;
mod log;
mod run;
mod sweep;
mod validate;
mod volume;
