mod bonnie;
mod cli;
mod jobfile;
mod run;
mod sweep;
mod volume;
