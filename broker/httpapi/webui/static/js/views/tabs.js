// views/tabs.js: the tabs of the run view. Each draws from the data the run
// view hands it (live projections, or the run as of a past position), so the
// same code shows now and then; each lives in its own file.

import { drawTree } from './tree.js';
import { drawTimeline } from './timeline.js';
import { drawLedger } from './ledger.js';
import { drawAsks } from './asks.js';
import { drawMailbox } from './mailbox.js';
import { drawCredentials } from './credentials.js';
import { drawEvents } from './events.js';
import { drawJobs } from './jobs.js';

export const tabs = [
  { id: 'tree', label: 'Tasks', draw: drawTree },
  { id: 'timeline', label: 'Delegations', draw: drawTimeline },
  { id: 'ledger', label: 'Ledger', draw: drawLedger },
  { id: 'asks', label: 'Asks', draw: drawAsks },
  { id: 'mailbox', label: 'Mailbox', draw: drawMailbox },
  { id: 'credentials', label: 'Credentials', draw: drawCredentials },
  { id: 'events', label: 'Events', draw: drawEvents },
  { id: 'jobs', label: 'Jobs', draw: drawJobs },
];
