-- 0010: reserved for a concurrent change that takes this number. This
-- placeholder keeps the sequence without gaps on this branch; the merge
-- replaces it with that change's 0010 (delete this file then).
SELECT 1;
