-- Findings with the latest analyst action, from finding_history (written by sentinel.findings).

CREATE VIEW v_findings_triage AS
SELECT f.finding_id, f.rule_id, f.severity, f.status, f.title, f.actor, f.bucket,
       f.first_seen, f.last_seen, f.event_count, f.bytes,
       h.who AS last_action_by, h.changed_at AS last_action_at, h.reason AS last_action_reason
FROM findings f
LEFT JOIN (SELECT * FROM finding_history WHERE change = 'status'
           QUALIFY row_number() OVER (PARTITION BY finding_id ORDER BY changed_at DESC) = 1) h
  USING (finding_id)
ORDER BY f.last_seen DESC;
COMMENT ON VIEW v_findings_triage IS 'Findings with the latest analyst action (who, when, why).';
