-- 0013: the model gate profile a job named at submit (job.submit
-- gateProfile, e.g. "upstream-mpc-v1"); '' is the dataset purpose's
-- default. The model's gate report records the profile and version it was
-- judged by.
ALTER TABLE jobs ADD COLUMN gate_profile TEXT NOT NULL DEFAULT '';
