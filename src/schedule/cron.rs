//! TEMPORARY stub: the cron adapter lands from the hook-config branch.
#[derive(Debug, Clone)]
pub struct CronSchedule(std::time::Duration);
impl CronSchedule {
    pub fn parse(spec: &str) -> Result<CronSchedule, String> {
        Err(format!("{spec}: stub"))
    }
    pub fn next_after(
        &self,
        t: chrono::DateTime<chrono::Local>,
    ) -> Option<chrono::DateTime<chrono::Local>> {
        Some(t + chrono::Duration::from_std(self.0).ok()?)
    }
}
