package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/broker"
	"github.com/crewlog/crewlog/projections"
)

// Job views (D§9): crewctl jobs RUN lists a run's dispatcher jobs (query.jobs, all pages);
// crewctl show job RUN JOB shows one with its grant and every request id it
// has seen (query.job, all pages).

// jobDetail is query.job's answer with every page's requests.
type jobDetail = broker.JobDetail

func (a *app) jobsCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "jobs RUN",
		Short: "A run's dispatcher jobs: status, lease, calls in flight and ids seen (query.jobs)",
		Args:  args(1, "a run id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.view(cmd.Context(), func(b Broker) error {
				// NB: query.jobs is paged, its page cut to the frame: a run's jobs need not fit in one answer.
				jobs, err := callPaged[broker.JobSummary](cmd.Context(), b, "query.jobs", "jobs", argv[0])
				if err != nil {
					return err
				}
				res := struct {
					Jobs []broker.JobSummary `json:"jobs"`
				}{jobs}
				if a.json {
					return a.printJSON(res)
				}
				tw := a.stdout().table()
				tw.printf("JOB\tTASK\tSTATUS\tLEASE\tROOT\tIN FLIGHT\tSEEN\tTOOLS\tUPDATED\n")
				for _, j := range res.Jobs {
					tw.printf("%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", j.JobID, j.TaskID, j.Status, leaseOf(j),
						orDash(j.RootToolCallID), j.InFlight, j.Seen, j.Tools, millis(j.UpdatedAt))
				}
				return tw.flush()
			})
		},
	}
}

func leaseOf(j broker.JobSummary) string {
	switch {
	case j.LeaseActive:
		return fmt.Sprintf("%d active", j.Generation)
	case j.Generation > 0:
		return fmt.Sprintf("%d cleared", j.Generation)
	}
	return "-"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// showJobCmd is crewctl show job RUN JOB.
func (a *app) showJobCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "job RUN JOB",
		Short: "A dispatcher job: its grant, lease and every request id it has seen (query.job)",
		Args:  args(2, "a run id and a job id"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.view(cmd.Context(), func(b Broker) error {
				var job jobDetail
				cursor := ""
				for {
					var page jobDetail
					p := map[string]any{"runId": argv[0], "jobId": argv[1], "limit": 500}
					if cursor != "" {
						p["cursor"] = cursor
					}
					if err := call(cmd.Context(), b, "query.job", p, &page); err != nil {
						return err
					}
					reqs := append(job.Requests, page.Requests...)
					job, job.Requests = page, reqs
					if cursor = page.NextCursor; cursor == "" {
						break
					}
				}
				job.NextCursor = ""
				if job.Requests == nil {
					job.Requests = []*projections.ProxyRequest{}
				}
				if a.json {
					return a.printJSON(job)
				}
				w := a.stdout()
				w.printf("job %s (task %s) %s, lease %s, root %s; %d in flight, %d ids seen; revoked roots %d, saturated %v\n",
					job.JobID, job.TaskID, job.Status, leaseOf(job.JobSummary), orDash(job.RootToolCallID), job.InFlight, job.Seen,
					job.RevokedRoots, job.Saturated)
				tw := w.table()
				tw.printf("TOOL\tREAD-ONLY\tCALLABLE\tFINGERPRINT\n")
				for _, g := range job.Grant {
					tw.printf("%s\t%v\t%s\t%s\n", g.Name, g.ReadOnly, orDash(g.Callable), g.Fingerprint)
				}
				tw.printf("\n")
				tw.printf("REQUEST\tLEASE\tTOOL\tSTATE\tREASON\tARGS BYTES\tRESULT AT\n")
				for _, r := range job.Requests {
					at := "-"
					if r.ResultPosition > 0 {
						at = fmt.Sprint(r.ResultPosition)
					}
					state := r.State
					if r.Fenced {
						state += " (late result fenced)"
					}
					tw.printf("%s\t%d\t%s\t%s\t%s\t%d\t%s\n", r.RequestID, r.Generation, orDash(r.Tool), state, orDash(r.Reason),
						r.ArgsBytes, at)
				}
				return tw.flush()
			})
		},
	}
}
