mod bonnie;
mod cli;
mod jobfile;
mod run;
mod sweep;
mod validate;
mod volume;
