package main

import (
	"github.com/spf13/cobra"

	"github.com/crewlog/crewlog/broker/wire"
)

// cancelCmd asks crewd to cancel any run's delegation by its subId, with the admin token: the pool is
// daemon-wide, so an operator can take a slot back from a run whose own runtime does not.
func (a *app) cancelCmd() *cobra.Command {
	var (
		reason string
		free   bool
	)
	c := &cobra.Command{
		Use:   "cancel SUBID",
		Short: "Cancel any run's delegation that holds a slot (delegate.cancel; --free also settles it cancelled)",
		Args:  args(1, "a delegation's subId (crewctl slots lists them)"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			sub := argv[0]
			return a.view(cmd.Context(), func(b Broker) error {
				p := map[string]any{"subId": sub}
				if reason != "" {
					p["reason"] = reason
				}
				if err := b.Call(cmd.Context(), "delegate.cancel", p, nil); err != nil {
					return cancelRefused("delegate.cancel", err)
				}
				out := map[string]any{"subId": sub, "cancelRequested": true, "freed": false}
				if free {
					text := "cancelled by the operator"
					if reason != "" {
						text += ": " + reason
					}
					settle := map[string]any{"subId": sub, "outcome": "cancelled", "text": text}
					if err := b.Call(cmd.Context(), "delegate.settle", settle, nil); err != nil {
						return cancelRefused("delegate.settle", err)
					}
					out["freed"] = true
				}
				if a.json {
					return a.printJSON(out)
				}
				if free {
					a.stdout().printf("%s cancelled and settled: its slot is free\n", sub)
				} else {
					a.stdout().printf("%s asked to cancel: its runtime settles it (or run again with --free)\n", sub)
				}
				return nil
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why, recorded with the cancel intent")
	c.Flags().BoolVar(&free, "free", false,
		"also settle it cancelled at once, freeing the slot without the run's runtime")
	return c
}

// cancelRefused is the error of method's call, as call makes it, with crewctl's advice when crewd found no delegation
// of that subId holding a slot: crewd says to name its run, which a protocol client can and crewctl cancel cannot.
func cancelRefused(method string, err error) error {
	if wire.CodeOf(err) != wire.CodeNoTask {
		return brokerErr(method, err)
	}
	return hinted(brokerErr(method, err), "crewctl cancel takes a delegation that holds a slot, as crewctl slots lists "+
		"them; one settled already holds none, and there is nothing to cancel")
}
