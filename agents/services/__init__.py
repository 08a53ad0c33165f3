"""Write-side operations of turns: runs, permissions, recovery, and asking."""
