package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/spf13/cobra"
)

// parseBound parses "var=lo:hi".
func channelParseBound(s string) (string, twinstore.ChannelBound, error) {
	name, rng, ok := strings.Cut(s, "=")
	lo, hi, ok2 := strings.Cut(rng, ":")
	if !ok || !ok2 || strings.TrimSpace(name) == "" {
		return "", twinstore.ChannelBound{}, usagef("--bound %q: want VARIABLE=MIN:MAX", s)
	}
	a, err1 := strconv.ParseFloat(strings.TrimSpace(lo), 64)
	b, err2 := strconv.ParseFloat(strings.TrimSpace(hi), 64)
	if err1 != nil || err2 != nil {
		return "", twinstore.ChannelBound{}, usagef("--bound %q: MIN and MAX must be numbers", s)
	}
	return strings.TrimSpace(name), twinstore.ChannelBound{Min: a, Max: b}, nil
}

func newChannelCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "channel", Short: "Channel profiles: whether and how the twin may write to a line"}

	var (
		line, profile, policy, scene, as, chID string
		bounds                                 []string
	)
	set := &cobra.Command{
		Use:   "set --line L --profile legacy|hybrid_twin --policy recommendation_only|hitl_governed|bounded_auto [--scene ID@VER] [--bound VAR=MIN:MAX ...] --as PERSON",
		Short: "Set the channel profile of a line (audited)",
		Long: `Set the channel profile of line L. The write guard writes only to a line
whose channel has profile hybrid_twin and a policy that allows writing:
recommendation_only never writes, hitl_governed writes approved
certificates, bounded_auto additionally keeps every target within the
--bound ranges (a control without a bound is never written). A line without
a channel is never written. --scene ties the channel to a stored scene of
the line (bounds must name its controls).`,
		Args: argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if line == "" || profile == "" || policy == "" {
				return usagef("%s: --line, --profile and --policy are required", cmd.CommandPath())
			}
			if err := certRequireAs(cmd, as); err != nil {
				return err
			}
			c := twinstore.ChannelRecord{LineID: line, ChannelID: chID, Profile: profile, ControlPolicy: policy}
			if scene != "" {
				id, ver, ok := strings.Cut(scene, "@")
				if !ok || id == "" || ver == "" {
					return usagef("--scene %q: want ID@VERSION", scene)
				}
				c.SceneID, c.SceneVersion = id, ver
			}
			for _, b := range bounds {
				name, r, err := channelParseBound(b)
				if err != nil {
					return err
				}
				if c.Bounds == nil {
					c.Bounds = map[string]twinstore.ChannelBound{}
				}
				if _, dup := c.Bounds[name]; dup {
					return usagef("--bound: %s given twice", name)
				}
				c.Bounds[name] = r
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			r, err := s.SetChannel(cmd.Context(), c, as)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { fmt.Fprint(w, "channel set\n"); printChannel(w, r) })
		},
	}
	f := set.Flags()
	f.StringVar(&line, "line", "", "the line")
	f.StringVar(&profile, "profile", "", "legacy or hybrid_twin")
	f.StringVar(&policy, "policy", "", "recommendation_only, hitl_governed or bounded_auto")
	f.StringVar(&scene, "scene", "", "the scene the channel serves (ID@VERSION)")
	f.StringArrayVar(&bounds, "bound", nil, "absolute bounds of a control for bounded_auto (VAR=MIN:MAX, repeatable)")
	f.StringVar(&chID, "channel-id", "", "channel id (default ch-LINE)")
	f.StringVar(&as, "as", "", "who sets the channel")

	var sLine string
	show := &cobra.Command{
		Use:   "show --line L",
		Short: "Show the channel profile of a line (AML_NOT_FOUND: no channel, the guard never writes)",
		Args:  argsExact(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sLine == "" {
				return usagef("%s: --line is required", cmd.CommandPath())
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			r, err := s.GetChannel(cmd.Context(), sLine)
			if err != nil {
				return err
			}
			return a.emit(r, func(w io.Writer) { printChannel(w, r) })
		},
	}
	show.Flags().StringVar(&sLine, "line", "", "the line")

	cmd.AddCommand(set, show)
	return cmd
}

func printChannel(w io.Writer, c *twinstore.ChannelRecord) {
	fmt.Fprintf(w, "line %s  channel %s\nprofile %s  policy %s\n", c.LineID, c.ChannelID, c.Profile, c.ControlPolicy)
	if c.SceneID != "" {
		fmt.Fprintf(w, "scene %s@%s\n", c.SceneID, c.SceneVersion)
	}
	ks := make([]string, 0, len(c.Bounds))
	for k := range c.Bounds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Fprintf(w, "  bound %-26s [%g, %g]\n", k, c.Bounds[k].Min, c.Bounds[k].Max)
	}
	fmt.Fprintf(w, "set by %s at %s\n", c.UpdatedBy, certTime(c.UpdatedAt))
}
