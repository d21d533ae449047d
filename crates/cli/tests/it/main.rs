mod bonnie;
mod cli;
mod jobfile;
mod run;
mod volume;
