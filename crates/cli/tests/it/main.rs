mod cli;
mod jobfile;
mod run;
mod volume;
