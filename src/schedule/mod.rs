pub mod cron;
